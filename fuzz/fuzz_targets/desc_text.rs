//! Fuzzes reading a data.prototxt: any text either gives a valid desc or an error, never a
//! panic; a valid desc survives a text round trip.
#![no_main]

use hogwild::feed::DataFeedDesc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(desc) = DataFeedDesc::from_text(text) {
        let again = DataFeedDesc::from_text(&desc.to_text()).expect("round trip");
        assert_eq!(again, desc);
        assert!(!desc.used_slots().is_empty());
    }
});
