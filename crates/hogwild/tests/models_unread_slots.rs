//! `ModelConfig::unread_slots`: every used slot a model reads through no key of its configuration
//! is named with the key that would read it (a CTR model) or with `is_used: false`.

use hogwild::feed::DataFeedDesc;
use hogwild::models::ModelConfig;

const DESC: &str = r#"multi_slot_desc {
  slots { name: "words" type: "uint64" is_used: true }
  slots { name: "extra" type: "float" is_used: true }
  slots { name: "label" type: "uint64" is_used: true }
  slots { name: "off" type: "float" is_used: false }
}"#;

fn unread(model: &str) -> Vec<String> {
    let config = ModelConfig::from_toml(
        &format!("[model]\n{model}\n[optimizer]\nkind = \"sgd\"\nlr = 0.1\n"),
        "model.toml",
    )
    .unwrap();
    config
        .unread_slots(&DataFeedDesc::from_text(DESC).unwrap())
        .unwrap()
}

#[test]
fn each_model_names_the_used_slots_it_does_not_read() {
    assert_eq!(
        unread("kind = \"bow\"\nvocab = 10\nclasses = 2\ndim = 4"),
        [
            "used slot \"extra\" (float) is read through no key of the model (bow reads its \
          words_slot and label_slot only): set is_used: false for it in the desc"
        ]
    );
    let w2v = unread("kind = \"word2vec\"\ninput = \"ids\"\nvocab_file = \"v.txt\"\ndim = 4");
    let names: Vec<&str> = w2v.iter().map(|m| m.split('"').nth(1).unwrap()).collect();
    assert_eq!(names, ["extra", "label"], "{w2v:?}");
    assert_eq!(
        unread("kind = \"lr\"\nbuckets = 16"),
        [
            "used slot \"extra\" (float) is read through no key of the model, which trains as if \
          it were absent: add values = { words = \"extra\" } (the value of each id of field \
          \"words\") or weight_slot = \"extra\" (each instance's weight) to [model], or set \
          is_used: false for it in the desc"
        ]
    );
    // Read as values, or as weights, nothing is left.
    assert!(unread("kind = \"fm\"\nbuckets = 16\nvalues = { words = \"extra\" }").is_empty());
    assert!(unread("kind = \"lr\"\nbuckets = 16\nweight_slot = \"extra\"").is_empty());
}
