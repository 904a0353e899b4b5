//! Click-through-rate models over hashed categorical fields: logistic regression, a
//! factorization machine (Rendle 2010) and a field-aware one (Juan et al. 2016; its arithmetic
//! is in `ctr/ffm.rs`), as xLearn and Vowpal Wabbit train them.
//!
//! Each field is a uint64 slot of the DataFeedDesc (one or more ids per instance); a field's id
//! is hashed with the field's name into `buckets` rows of a table, so ids may be any 64-bit
//! values. A row holds the feature's linear weight and, for the factorization machine, its
//! factor vector `v` (`dim` wide, or the field's own size from `field_dims`); fields of the same
//! factor size share one table, and the row's optimizer slots sit beside it in the Hogwild store.
//!
//! A feature has a value `x`: 1 (a categorical feature), or, for a field named in `values`,
//! its entry in a float slot holding one value per id (libsvm's `index:value`). The prediction
//! is `p = sigmoid(b + sum_i x_i w_i + sum_{i<j} <v_i, v_j> x_i x_j)`, the pairwise term
//! computed in linear time as `0.5 * sum_k ((sum_i x_i v_ik)^2 - sum_i x_i^2 v_ik^2)`; when
//! factor sizes differ, component `k` is shared by the features whose size exceeds `k`. The
//! loss is the logistic loss of the label (a uint64 slot holding 0 or 1, or a float slot where
//! positive values are clicks), with an optional L2 penalty on the touched rows; with
//! `g = p - y`, a feature's weight gets the gradient `g x_i` and its factor `k`
//! `g x_i (sum_j x_j v_jk - x_i v_ik)`. Updates are applied instance by instance with SGD,
//! Adagrad or AdamAsync (lazy sparse rows, optional RMSProp); a batch is one optimizer call.
//! Without `values` no feature is multiplied by a value: each loop is compiled for both cases
//! and the case chosen once per batch.
//!
//! The field-aware factorization machine (`kind = "ffm"`) keeps, in a feature's row, its weight
//! and one factor vector per field (`num_fields x dim`); a field's number is its place in
//! `fields` or, for libffm data, the number its line gives (below `num_fields`, or the instance
//! is refused). Its instances are normalized as xLearn's are by default (`normalize`).
//!
//! The input of `hogwild convert` is read as it is written:
//! - libffm: `field_numbers = { ids = "fields" }` makes each id's entry in the `fields` slot its
//!   field: id `j` of field number `n` belongs to the field named `n`, hashed with that name
//!   (so the same index in two fields is two rows) and sized by `field_dims."n"`
//!   (`field_dims = { 3 = 4 }`). The `fields` slot is then no feature of its own.
//! - Vowpal Wabbit: `weight_slot = "weight"` reads each instance's importance weight `w >= 0`,
//!   which multiplies the instance's gradient (L2 share included): weight 2 is the SGD step of
//!   the gradient doubled, weight 0 leaves the instance out. The reported loss is the weighted
//!   mean `sum(w * loss) / sum(w)` of each batch (VW's average loss); the AUC counts each
//!   instance of positive weight once (importance weights that rebalance the classes, as after
//!   negative subsampling, do not change an AUC).
//!
//! Every slot the configuration names is checked when a worker is built (present, used, of the
//! right type; the label and weight slots may be absent outside training), and each instance's
//! values and field numbers when a batch is gathered, before anything trains: one entry per id,
//! values finite.
//!
//! The bias is the one parameter every instance updates. Written to the shared table per
//! instance, its cache line would travel between the cores on every instance of every thread
//! (hundreds of nanoseconds each time, as long as the whole instance). So each worker steps a
//! private copy of the bias (and its optimizer slots) instance by instance through a batch and
//! then adds what changed to the shared cells, one atomic add per cell and batch. With one
//! thread that is exactly the per-instance update; with several, the workers' batches of bias
//! steps are summed, as Hogwild sums the threads' steps of any other row.
//!
//! The factorization machines' rows of low-cardinality fields (an airport, a carrier, a month)
//! are in the same position, and each is two cache lines wide (weight, factors and their slots;
//! six for the field-aware one at 10 fields of 4 factors): with several workers, each steps
//! private copies of the hot rows its batches use and writes their changes back once every
//! [`LOCAL_MERGE_EVERY`] batches ([`LocalRows`](crate::store::LocalRows)), and whenever the
//! executor flushes the worker ([`Model::flush`]: at the end of its part of each epoch). The hot
//! rows are those a batch used at least [`LOCAL_MIN_USES`] times, counted in one batch of every
//! [`LOCAL_RECOUNT_EVERY`]; the others are updated in place. A lone factorization machine's
//! worker updates every row in place (the copies would only cost it time); a lone field-aware
//! one copies the hot rows where they take at least [`LOCAL_ALONE_MIN_SHARE`] of a batch's
//! uses, as its wide rows then skip the shared path's atomic copies and prefetches. An
//! instance of distinct fields steps the copies where they lie, beside the shared rows it read
//! ([`LocalRows::with_scratch`](crate::store::LocalRows::with_scratch)). Logistic regression
//! never copies: its rows of 8 bytes cost less to update in place than to look up in the
//! batch's map of used rows (measured: docs/benchmarks.md, CTR).
//!
//! Evaluation reports the logistic loss per batch and the exact AUC
//! over the whole run: each worker collects its instances' (logit, label) pairs in a
//! [`metrics::Auc`](crate::metrics::Auc), which the executor merges over threads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{padded, ModelConfig, ModelKind, OptimizerDesc};
use crate::feed::{Batch, DataFeedDesc, InMemoryDataset, SlotType};
use crate::metrics::Auc;
use crate::model::{Model, StageTimes};
use crate::optim::Optimizer;
use crate::rng::{fnv1a64, mix64};
use crate::store::{element_value, Drawn, LocalRows, Table, MAX_SLOTS, SHARED};
use crate::{Error, Result};
use prepared::Prepared;

/// Which CTR model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtrKind {
    /// Logistic regression: a bias and one weight per feature.
    Lr,
    /// Factorization machine: logistic regression plus pairwise factor interactions.
    Fm,
    /// Field-aware factorization machine: a factor vector per feature and field, each pair of
    /// features interacting through the vectors each keeps for the other's field.
    Ffm,
}

/// The CTR models' settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtrConfig {
    /// The label slot: uint64 0/1, or float (positive = click).
    #[serde(default = "default_label")]
    pub label_slot: String,
    /// The uint64 slots read as fields; empty: every used uint64 slot but the label and the
    /// slots of `field_numbers`.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Feature values: for a field, the float slot holding each of its ids' value `x` (as many
    /// per instance as the field has ids, in the same order). A feature of value `x` contributes
    /// `x * w` and `x * v`; the ids of fields not named here have value 1.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, String>,
    /// Numbered fields (libffm's): for a field slot, the uint64 slot holding each of its ids'
    /// field number (one per id). An id of field number `n` belongs to the field named `n`
    /// (hashed with that name, sized by `field_dims."n"`), not to the slot's own field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub field_numbers: BTreeMap<String, String>,
    /// The float slot holding each instance's importance weight (Vowpal Wabbit's, `>= 0`): it
    /// scales the instance's gradient and its share of the loss; weight 0 leaves the instance
    /// out. None: every instance weighs 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_slot: Option<String>,
    /// Rows of each hashed table.
    pub buckets: usize,
    /// Factor size of the factorization machine (default 8); not allowed for logistic regression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim: Option<usize>,
    /// Per-field factor sizes overriding `dim` (factorization machine only); the keys of
    /// numbered fields are their numbers (`field_dims = { 3 = 4 }`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub field_dims: BTreeMap<String, usize>,
    /// The field-aware factorization machine's number of fields `F`: each feature's row holds
    /// `F` factor vectors, one per field. Required with `field_numbers` (libffm's numbers must
    /// be below it); with named fields it is the length of `fields`, which numbers them in
    /// order (field 0 first), and may be left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_fields: Option<usize>,
    /// The field-aware factorization machine's instance-wise normalization (xLearn's default,
    /// on unless given `false`): each instance's feature values are divided by their L2 norm,
    /// so the linear term is scaled by `1/||x||` and the pairwise one by `1/||x||^2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
    /// L2 penalty on the weights and factors of each touched row.
    #[serde(default)]
    pub l2: f32,
    /// Initial factors are uniform in `[-init_scale, init_scale]`.
    #[serde(default = "default_init_scale")]
    pub init_scale: f32,
    /// Seed of the initial factors.
    #[serde(default)]
    pub seed: u64,
}

/// The defaults of a configuration file's `[model]` keys, except `buckets`, which has none: 0
/// here, which [`Ctr::new`] refuses.
impl Default for CtrConfig {
    fn default() -> Self {
        Self::new(0)
    }
}

fn default_label() -> String {
    "label".into()
}
fn default_init_scale() -> f32 {
    0.01
}

/// The factorization machine's factor size when none is given.
const DEFAULT_DIM: usize = 8;

/// The field-aware factorization machine's factor size when none is given (xLearn's `k`).
const DEFAULT_FFM_DIM: usize = 4;

impl CtrConfig {
    /// Settings with every default over `buckets` rows (the same as `CtrConfig { buckets,
    /// ..CtrConfig::default() }`).
    pub fn new(buckets: usize) -> Self {
        Self {
            label_slot: default_label(),
            fields: Vec::new(),
            values: BTreeMap::new(),
            field_numbers: BTreeMap::new(),
            weight_slot: None,
            buckets,
            dim: None,
            field_dims: BTreeMap::new(),
            num_fields: None,
            normalize: None,
            l2: 0.0,
            init_scale: default_init_scale(),
            seed: 0,
        }
    }

    /// The factor size of fields without their own (0 for logistic regression).
    fn default_dim(&self, kind: CtrKind) -> usize {
        match kind {
            CtrKind::Lr => 0,
            CtrKind::Fm => self.dim.unwrap_or(DEFAULT_DIM),
            CtrKind::Ffm => self.dim.unwrap_or(DEFAULT_FFM_DIM),
        }
    }

    /// The field-aware factorization machine's number of fields (0 for the other models).
    fn field_count(&self, kind: CtrKind) -> usize {
        match kind {
            CtrKind::Ffm => self.num_fields.unwrap_or(self.fields.len()),
            CtrKind::Lr | CtrKind::Fm => 0,
        }
    }

    /// Whether the field-aware factorization machine normalizes each instance.
    fn normalizes(&self) -> bool {
        self.normalize.unwrap_or(true)
    }

    /// How many factor vectors of the table's size a feature's row holds: one per field for
    /// the field-aware factorization machine, one otherwise.
    fn blocks(&self, kind: CtrKind) -> usize {
        match kind {
            CtrKind::Ffm => self.field_count(kind),
            CtrKind::Lr | CtrKind::Fm => 1,
        }
    }
    /// Checks the settings (see [`ModelConfig::validate`](super::ModelConfig::validate)).
    pub(crate) fn check(&self, kind: CtrKind) -> Result<()> {
        let bad = |field: &str, reason: String| {
            Err(Error::InvalidConfig {
                field: field.into(),
                reason,
            })
        };
        if self.buckets == 0 {
            return bad("buckets", "must be at least 1".into());
        }
        if kind == CtrKind::Lr && self.dim.is_some() {
            return bad(
                "dim",
                "logistic regression has no factors: remove it".into(),
            );
        }
        if kind == CtrKind::Lr && !self.field_dims.is_empty() {
            return bad(
                "field_dims",
                "logistic regression has no factors: remove it".into(),
            );
        }
        if self.dim == Some(0) {
            return bad("dim", "must be at least 1".into());
        }
        if kind == CtrKind::Ffm {
            self.check_ffm()?;
        } else {
            let only = "only the field-aware factorization machine (kind = \"ffm\") has it: \
                        remove it";
            if self.num_fields.is_some() {
                return bad("num_fields", only.into());
            }
            if self.normalize.is_some() {
                return bad("normalize", only.into());
            }
        }
        if let Some((name, _)) = self.field_dims.iter().find(|(_, &d)| d == 0) {
            return bad(&format!("field_dims.{name}"), "must be at least 1".into());
        }
        if self.fields.contains(&self.label_slot) {
            return bad(
                "fields",
                format!("the label slot \"{}\" cannot be a field", self.label_slot),
            );
        }
        if self.weight_slot.as_ref() == Some(&self.label_slot) {
            return bad(
                "weight_slot",
                format!(
                    "the label slot \"{}\" cannot be the weight",
                    self.label_slot
                ),
            );
        }
        for (key, map) in [
            ("values", &self.values),
            ("field_numbers", &self.field_numbers),
        ] {
            if let Some((field, slot)) = map.iter().find(|(_, slot)| **slot == self.label_slot) {
                return bad(
                    &format!("{key}.{field}"),
                    format!("the label slot \"{slot}\" cannot hold a field's {key}"),
                );
            }
        }
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return bad("l2", format!("{} must be finite and >= 0", self.l2));
        }
        if !(self.init_scale.is_finite() && self.init_scale >= 0.0) {
            return bad(
                "init_scale",
                format!("{} must be finite and >= 0", self.init_scale),
            );
        }
        Ok(())
    }

    /// The field-aware factorization machine's own checks: one factor size, and fields that
    /// are numbered, by libffm's numbers below `num_fields` or by their place in `fields`.
    fn check_ffm(&self) -> Result<()> {
        let bad = |field: &str, reason: String| {
            Err(Error::InvalidConfig {
                field: field.into(),
                reason,
            })
        };
        if !self.field_dims.is_empty() {
            return bad(
                "field_dims",
                "the field-aware factorization machine has one factor size: use dim".into(),
            );
        }
        match (self.field_numbers.is_empty(), self.num_fields) {
            (_, Some(0)) => bad("num_fields", "must be at least 1".into()),
            (false, None) => bad(
                "num_fields",
                "the field-aware factorization machine needs the number of fields of its \
                 numbered fields (field_numbers): set num_fields above the largest field number"
                    .into(),
            ),
            (true, _) if self.fields.is_empty() => bad(
                "fields",
                "the field-aware factorization machine numbers its named fields by their place \
                 in this list: name them (fields = [\"a\", \"b\"]), or give libffm's field \
                 numbers (field_numbers)"
                    .into(),
            ),
            (true, Some(n)) if n != self.fields.len() => bad(
                "num_fields",
                format!(
                    "{n}, but fields names {} fields: leave num_fields out",
                    self.fields.len()
                ),
            ),
            _ => Ok(()),
        }
    }

    /// The distinct factor sizes, ascending: one table each.
    fn table_dims(&self, kind: CtrKind) -> Vec<usize> {
        let mut dims: Vec<usize> = std::iter::once(self.default_dim(kind))
            .chain(self.field_dims.values().copied())
            .collect();
        dims.sort_unstable();
        dims.dedup();
        dims
    }

    /// Where batches laid out by `desc` hold what the configuration names: checks that the
    /// fields, values, field numbers and weights are used slots of the right type.
    fn slots(&self, kind: CtrKind, desc: &DataFeedDesc) -> Result<Slots> {
        let dims = self.table_dims(kind);
        let used = desc.used_slots();
        let invalid = |field: String, reason: String| Error::InvalidConfig { field, reason };
        // The used slot `name` of type `kind`, for the configuration key `key`.
        let slot = |key: String, name: &str, kind: SlotType| -> Result<usize> {
            let at = used.iter().position(|s| s.name == name).ok_or_else(|| {
                invalid(
                    key.clone(),
                    format!("the DataFeedDesc has no used slot \"{name}\""),
                )
            })?;
            if used[at].slot_type() != kind {
                return Err(invalid(
                    key,
                    format!(
                        "\"{name}\" must be a {} slot in the DataFeedDesc, not {}",
                        kind.name(),
                        used[at].slot_type().name()
                    ),
                ));
            }
            Ok(at)
        };
        let label_at = used
            .iter()
            .position(|s| s.name == self.label_slot)
            .map(|at| (at, used[at].slot_type()));
        let weight_at = match &self.weight_slot {
            // Like the label, the weights are needed in training only (checked there).
            Some(name) if used.iter().any(|s| &s.name == name) => {
                Some(slot("weight_slot".into(), name, SlotType::F32)?)
            }
            _ => None,
        };
        let names: Vec<String> = if self.fields.is_empty() {
            let numbers: Vec<&String> = self.field_numbers.values().collect();
            used.iter()
                .filter(|s| s.name != self.label_slot && s.slot_type() == SlotType::U64)
                .filter(|s| !numbers.contains(&&s.name))
                .map(|s| s.name.clone())
                .collect()
        } else {
            self.fields.clone()
        };
        if names.is_empty() {
            return Err(invalid(
                "fields".into(),
                "the DataFeedDesc has no used uint64 slot besides the label".into(),
            ));
        }
        for (key, map) in [
            ("values", &self.values),
            ("field_numbers", &self.field_numbers),
        ] {
            if let Some(field) = map.keys().find(|n| !names.contains(n)) {
                return Err(invalid(
                    format!("{key}.{field}"),
                    format!("\"{field}\" is not one of the fields {names:?}"),
                ));
            }
        }
        if let Some((field, number_slot)) = self
            .field_numbers
            .iter()
            .find(|(_, slot)| names.contains(slot))
        {
            return Err(invalid(
                format!("field_numbers.{field}"),
                format!("\"{number_slot}\" holds field numbers and cannot also be a field"),
            ));
        }
        let numbered = !self.field_numbers.is_empty();
        if kind == CtrKind::Ffm && numbered {
            if let Some(name) = names.iter().find(|n| !self.field_numbers.contains_key(*n)) {
                return Err(invalid(
                    format!("fields.{name}"),
                    format!(
                        "the field-aware factorization machine's fields are numbered by \
                         field_numbers: give \"{name}\" its field numbers too, or leave it out"
                    ),
                ));
            }
        }
        for name in self.field_dims.keys() {
            let named = names.contains(name) && !self.field_numbers.contains_key(name);
            if named || (numbered && field_number(name).is_some()) {
                continue;
            }
            let reason = if self.field_numbers.contains_key(name) {
                format!(
                    "the ids of \"{name}\" belong to numbered fields: size those \
                     (field_dims = {{ 1 = 4 }} for field number 1)"
                )
            } else if numbered {
                format!("\"{name}\" is neither one of the fields {names:?} nor a field number")
            } else {
                format!("\"{name}\" is not one of the fields {names:?}")
            };
            return Err(invalid(format!("field_dims.{name}"), reason));
        }
        let default = self.default_dim(kind);
        let table_of = |dim: usize| dims.iter().position(|&d| d == dim).unwrap_or(0);
        let fields = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let at = slot(format!("fields.{name}"), name, SlotType::U64)?;
                let dim = self.field_dims.get(name).copied().unwrap_or(default);
                let values = match self.values.get(name) {
                    Some(v) => Some(slot(format!("values.{name}"), v, SlotType::F32)?),
                    None => None,
                };
                let numbers = match self.field_numbers.get(name) {
                    Some(n) => Some(slot(format!("field_numbers.{name}"), n, SlotType::U64)?),
                    None => None,
                };
                Ok(Field {
                    at,
                    index: index as u32,
                    table: table_of(dim),
                    salt: salt(name),
                    values,
                    numbers,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let numbered_tables = self
            .field_dims
            .iter()
            .filter_map(|(key, &dim)| Some((field_number(key)?, table_of(dim))))
            .collect();
        let field_count = match kind {
            CtrKind::Ffm => Some(self.field_count(kind) as u64),
            CtrKind::Lr | CtrKind::Fm => None,
        };
        let layout = Layout {
            plain: field_count.is_none()
                && fields
                    .iter()
                    .all(|f| f.values.is_none() && f.numbers.is_none()),
            field_count,
            valued: fields.iter().any(|f| f.values.is_some()),
            numbered: if numbered {
                NumberedFields::new(numbered_tables, table_of(default))
            } else {
                NumberedFields::default()
            },
            fields,
            slot_names: used.iter().map(|s| s.name.clone()).collect(),
        };
        Ok(Slots {
            layout,
            label_at,
            weight_at,
        })
    }

    /// The label's position, which training needs, after checking that the weights are there
    /// when the configuration names them (evaluation and prediction do without both).
    fn training_label(
        &self,
        label_at: Option<(usize, SlotType)>,
        weight_at: Option<usize>,
    ) -> Result<(usize, SlotType)> {
        let Some(label_at) = label_at else {
            return Err(Error::InvalidConfig {
                field: "label_slot".into(),
                reason: format!(
                    "training needs the used slot \"{}\" in the DataFeedDesc",
                    self.label_slot
                ),
            });
        };
        if let (Some(name), None) = (&self.weight_slot, weight_at) {
            return Err(Error::InvalidConfig {
                field: "weight_slot".into(),
                reason: format!("training needs the used slot \"{name}\" in the DataFeedDesc"),
            });
        }
        Ok(label_at)
    }

    /// Whether a `kind` model can read batches laid out by `desc` (see
    /// [`ModelConfig::check_desc`](super::ModelConfig::check_desc)).
    pub(crate) fn check_desc(
        &self,
        kind: CtrKind,
        desc: &DataFeedDesc,
        training: bool,
    ) -> Result<()> {
        let slots = self.slots(kind, desc)?;
        if training {
            self.training_label(slots.label_at, slots.weight_at)?;
        }
        Ok(())
    }

    /// The used slots of `desc` a `kind` model reads through no key, each with the key that
    /// would read it (see [`ModelConfig::unread_slots`](super::ModelConfig::unread_slots)).
    pub(crate) fn unread_slots(&self, kind: CtrKind, desc: &DataFeedDesc) -> Result<Vec<String>> {
        let slots = self.slots(kind, desc)?;
        let mut read: Vec<usize> = slots.label_at.map(|(at, _)| at).into_iter().collect();
        read.extend(slots.weight_at);
        for field in &slots.layout.fields {
            read.extend(
                [Some(field.at), field.values, field.numbers]
                    .into_iter()
                    .flatten(),
            );
        }
        let used = desc.used_slots();
        // The fields a float slot may hold the values of: those without values yet.
        let fields: Vec<&str> = slots
            .layout
            .fields
            .iter()
            .filter(|f| f.values.is_none())
            .map(|f| used[f.at].name.as_str())
            .collect();
        let field = match fields.as_slice() {
            [one] => one.to_string(),
            _ => "FIELD".to_string(),
        };
        Ok(used
            .iter()
            .enumerate()
            .filter(|(at, _)| !read.contains(at))
            .map(|(_, slot)| {
                let name = &slot.name;
                let keys = match slot.slot_type() {
                    SlotType::F32 => format!(
                        "values = {{ {field} = \"{name}\" }} (the value of each id of field \
                         \"{field}\") or weight_slot = \"{name}\" (each instance's weight)"
                    ),
                    SlotType::U64 => format!(
                        "\"{name}\" to fields, or field_numbers = {{ FIELD = \"{name}\" }} \
                         (the field number of each id of FIELD)"
                    ),
                };
                format!(
                    "used slot \"{name}\" ({}) is read through no key of the model, which trains \
                     as if it were absent: add {keys} to [model], or set is_used: false for it \
                     in the desc",
                    slot.slot_type().name()
                )
            })
            .collect())
    }
}

/// A logistic regression or factorization machine model.
#[derive(Debug)]
pub struct Ctr<O> {
    kind: CtrKind,
    cfg: CtrConfig,
    opt: O,
    /// Factor size of each table, ascending.
    dims: Vec<usize>,
    /// One table per factor size: rows of `[w, v_1 .. v_dim]`.
    tables: Vec<Table>,
    bias: Table,
    /// The in-memory dataset of the training run under way, as the model trains it
    /// ([`Model::prepare_dataset`]).
    prepared: Mutex<Option<Arc<Prepared>>>,
}

/// Where a worker finds one field: its batch slot, table and hash salt, and the batch slots of
/// its ids' values and field numbers when it has them.
#[derive(Debug, Clone)]
struct Field {
    at: usize,
    /// The field's number in a field-aware factorization machine: its place among the fields.
    index: u32,
    table: usize,
    salt: u64,
    /// The float slot of each id's value (`values`).
    values: Option<usize>,
    /// The uint64 slot of each id's field number (`field_numbers`): then each id's table and
    /// salt are its number's ([`NumberedFields`]), not `table` and `salt`.
    numbers: Option<usize>,
}

/// How a worker reads the fields of a batch: the fields, the tables and salts of numbered
/// fields, and the used slots' names (for errors).
#[derive(Debug)]
struct Layout {
    fields: Vec<Field>,
    /// No field has values or field numbers: the features are hashed as
    /// [`Ctr::push_plain`] does, with nothing to check.
    plain: bool,
    /// Some field has values: then `batch_xs` and `xs` hold every feature's value (1 for the
    /// fields without), and the model's arithmetic multiplies by them.
    valued: bool,
    /// The field-aware factorization machine's number of fields: then `batch_fields` and
    /// `fields` hold every feature's field number, which must be below it.
    field_count: Option<u64>,
    numbered: NumberedFields,
    slot_names: Vec<String>,
}

/// Where [`Ctr::push_features`] appends an instance's features: their tables and rows, values
/// and field numbers.
type Features<'a> = (
    &'a mut Vec<(usize, usize)>,
    &'a mut Vec<f32>,
    &'a mut Vec<u32>,
);

/// Where a configuration's slots are in the batches of one desc: what a worker reads.
struct Slots {
    layout: Layout,
    label_at: Option<(usize, SlotType)>,
    weight_at: Option<usize>,
}

impl Layout {
    /// Checks that slot `at` has one entry (`got`, `what` they are) per id of field `f` (`ids`)
    /// in instance `i`.
    fn check_per_id(
        &self,
        f: &Field,
        at: usize,
        what: &str,
        got: usize,
        ids: usize,
        i: usize,
    ) -> Result<()> {
        if got == ids {
            return Ok(());
        }
        Err(Error::BadInstance {
            slot: self.slot_names[at].clone(),
            instance: i,
            reason: format!(
                "{got} {what} for the {ids} ids of slot \"{}\" (one per id)",
                self.slot_names[f.at]
            ),
        })
    }
}

impl Layout {
    /// Checks that the field numbers `numbers` (of slot `at`, for the ids `ids` of instance
    /// `i`) are below the field-aware factorization machine's `count` fields.
    fn check_field_numbers(
        &self,
        at: usize,
        numbers: &[u64],
        ids: &[u64],
        count: u64,
        i: usize,
    ) -> Result<()> {
        let Some(k) = numbers.iter().position(|&n| n >= count) else {
            return Ok(());
        };
        Err(Error::BadInstance {
            slot: self.slot_names[at].clone(),
            instance: i,
            reason: format!(
                "field number {} of id {} (position {k}) is out of range: the model has \
                 num_fields = {count} (fields 0 to {})",
                numbers[k],
                ids[k],
                count - 1
            ),
        })
    }
}

/// The table and hash salt of each field number: field `n` is the field named `n` (its decimal
/// digits), so it is hashed with that name and sized by `field_dims."n"`.
#[derive(Debug, Default)]
struct NumberedFields {
    /// Fields `0..NUMBERED_KEPT`, looked up instead of hashed for every id.
    kept: Vec<(usize, u64)>,
    /// The tables of the numbers `field_dims` sizes.
    tables: BTreeMap<u64, usize>,
    /// The table of the other numbers.
    default_table: usize,
}

/// Field numbers below this have their table and salt computed once per worker (libffm data
/// numbers its fields from 0 or 1, rarely beyond a few dozen).
const NUMBERED_KEPT: u64 = 256;

impl NumberedFields {
    fn new(tables: BTreeMap<u64, usize>, default_table: usize) -> Self {
        let mut numbered = Self {
            kept: Vec::new(),
            tables,
            default_table,
        };
        numbered.kept = (0..NUMBERED_KEPT).map(|n| numbered.compute(n)).collect();
        numbered
    }

    #[inline]
    fn get(&self, number: u64) -> (usize, u64) {
        if number < NUMBERED_KEPT {
            self.kept[number as usize]
        } else {
            self.compute(number)
        }
    }

    fn compute(&self, number: u64) -> (usize, u64) {
        let table = self.tables.get(&number).copied();
        (table.unwrap_or(self.default_table), number_salt(number))
    }
}

/// One worker's scratch buffers and slot positions.
#[derive(Debug)]
pub struct CtrWorker {
    layout: Layout,
    label_at: Option<(usize, SlotType)>,
    /// The batch slot of the importance weights, when the desc has `weight_slot`.
    weight_at: Option<usize>,
    /// The instance's features: table and row.
    feats: Vec<(usize, usize)>,
    /// With `layout.valued`: the instance's features' values.
    xs: Vec<f32>,
    /// With `layout.field_count`: the instance's features' field numbers.
    fields: Vec<u32>,
    /// Every instance's features of the batch, hashed up front so that the rows of instances
    /// ahead can be prefetched; instance `i`'s are
    /// `batch_feats[batch_starts[i]..batch_starts[i + 1]]` (and their values the same range of
    /// `batch_xs`, with `layout.valued`).
    batch_feats: Vec<(usize, usize)>,
    batch_xs: Vec<f32>,
    batch_fields: Vec<u32>,
    batch_starts: Vec<usize>,
    /// The labels and importance weights of a referred batch (at `label_at` and `weight_at`,
    /// the other slots empty), from the prepared dataset ([`Ctr::gather_prepared`]).
    labels: Batch,
    /// In training, per entry of `batch_feats`: its row's private copy in `rows`, or [`SHARED`];
    /// `local` holds the current instance's part.
    batch_local: Vec<u32>,
    local: Vec<u32>,
    /// The private copies of the rows the batch uses often (`copy_rows`: when other workers
    /// train at the same time, and for a lone field-aware machine, see [`Ctr::workers`]).
    rows: LocalRows,
    copy_rows: bool,
    /// Whether the batch gathered last trains (its rows are prefetched with their slots).
    training: bool,
    /// The features' rows, concatenated (`1 + dim` values each).
    vals: Vec<f32>,
    /// Whether the field-aware machine's instance in training steps its rows where they lie
    /// (each feature in a field and a row of its own, the factor size compiled in): its private
    /// copies in `rows`, the shared rows read into the scratch part of `rows`' buffer
    /// ([`LocalRows::with_scratch`]), each feature's row from `offs` there.
    in_place: bool,
    offs: Vec<usize>,
    sum: Vec<f32>,
    sumsq: Vec<f32>,
    grad: Vec<f32>,
    /// The field-aware factorization machine's factor blocks an instance updates: block `f` of
    /// feature `i` at `i * fields + f`.
    touched: Vec<bool>,
    /// The runs of a row an update steps, and a row's weights and slots while it does.
    runs: Vec<std::ops::Range<usize>>,
    scratch: Vec<f32>,
    /// The evaluated instances' (logit, label) pairs, drained by the executor.
    auc: Auc,
}

impl CtrWorker {
    /// Empties the batch's features before gathering the next batch's, for training or not.
    fn start_batch(&mut self, training: bool) {
        self.training = training;
        self.batch_feats.clear();
        self.batch_xs.clear();
        self.batch_fields.clear();
        self.batch_starts.clear();
        self.batch_starts.push(0);
        self.batch_local.clear();
    }
}

/// The per-batch optimizer steps of the tables and the bias.
struct Steps<S> {
    tables: Vec<S>,
    bias: S,
}

fn table_name(kind: CtrKind, dim: usize) -> String {
    match kind {
        CtrKind::Lr => "weights".into(),
        CtrKind::Fm => format!("fm_k{dim}"),
        CtrKind::Ffm => format!("ffm_k{dim}"),
    }
}

/// A field name's hash salt (FNV-1a of its bytes, mixed).
fn salt(name: &str) -> u64 {
    salt_of_bytes(name.as_bytes())
}

fn salt_of_bytes(bytes: &[u8]) -> u64 {
    mix64(fnv1a64(bytes))
}

/// The salt of field number `n`: that of the field named by its decimal digits, computed
/// without a string.
fn number_salt(mut n: u64) -> u64 {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    salt_of_bytes(&digits[at..])
}

/// `key` as a field number, when it is one written as [`number_salt`] reads it (no sign, no
/// leading zero).
fn field_number(key: &str) -> Option<u64> {
    key.parse::<u64>().ok().filter(|n| n.to_string() == key)
}

impl<O: Optimizer<f32>> Ctr<O> {
    /// A model with fresh tables (call [`Ctr::init`], the startup step, before training).
    pub fn new(kind: CtrKind, cfg: CtrConfig, opt: O) -> Result<Self> {
        cfg.check(kind)?;
        let dims = cfg.table_dims(kind);
        let tables = dims
            .iter()
            .map(|&d| {
                Table::new(
                    &table_name(kind, d),
                    cfg.buckets,
                    1 + d * cfg.blocks(kind),
                    &opt,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let bias = Table::new("bias", 1, 1, &opt)?;
        Ok(Self::assemble(kind, cfg, opt, dims, tables, bias))
    }

    /// A model from a checkpoint's tables (which must fit `cfg` and `opt`).
    pub fn from_checkpoint(
        kind: CtrKind,
        cfg: CtrConfig,
        opt: O,
        ck: &mut crate::checkpoint::Checkpoint,
    ) -> Result<Self> {
        cfg.check(kind)?;
        let dims = cfg.table_dims(kind);
        let tables = dims
            .iter()
            .map(|&d| ck.take_table(&table_name(kind, d), cfg.buckets, 1 + d * cfg.blocks(kind)))
            .collect::<Result<Vec<_>>>()?;
        let bias = ck.take_table("bias", 1, 1)?;
        for t in tables.iter().chain(std::iter::once(&bias)) {
            t.check_optimizer::<O>()?;
        }
        Ok(Self::assemble(kind, cfg, opt, dims, tables, bias))
    }

    fn assemble(
        kind: CtrKind,
        cfg: CtrConfig,
        opt: O,
        dims: Vec<usize>,
        mut tables: Vec<Table>,
        bias: Table,
    ) -> Self {
        for (t, table) in tables.iter_mut().enumerate() {
            if table.dim() > 1 {
                table.set_drawn(Drawn {
                    seed: cfg.seed ^ ((t as u64) << 56),
                    scale: cfg.init_scale,
                    from: 1,
                });
            }
        }
        Self {
            kind,
            cfg,
            opt,
            dims,
            tables,
            bias,
            prepared: Mutex::new(None),
        }
    }

    /// Which model.
    pub fn kind(&self) -> CtrKind {
        self.kind
    }
    /// The settings.
    pub fn config(&self) -> &CtrConfig {
        &self.cfg
    }
    /// The hashed tables, one per factor size (ascending).
    pub fn feature_tables(&self) -> &[Table] {
        &self.tables
    }

    /// The startup step: weights and bias zero, factors uniform in `[-init_scale, init_scale]`,
    /// deterministic in the seed, the table and the row.
    pub fn init(&self) {
        // A row's first weight (the linear term) starts at zero, as a fresh table holds it;
        // with no factors (logistic regression) nothing is drawn, and the table's pages are
        // first touched by the training workers instead of here.
        for table in &self.tables {
            table.write_drawn();
        }
        self.bias.write_weights(0, &[0.0]);
    }

    /// A worker for batches laid out by `desc`: checks that the fields, values, field numbers
    /// and weights the configuration names are used slots of the right type.
    pub fn new_worker(&self, desc: &DataFeedDesc) -> Result<CtrWorker> {
        let Slots {
            layout,
            label_at,
            weight_at,
        } = self.cfg.slots(self.kind, desc)?;
        let max_dim = self.dims.last().copied().unwrap_or(0);
        Ok(CtrWorker {
            layout,
            label_at,
            weight_at,
            feats: Vec::with_capacity(64),
            xs: Vec::new(),
            fields: Vec::new(),
            batch_feats: Vec::with_capacity(64 * 256),
            batch_xs: Vec::new(),
            batch_fields: Vec::new(),
            batch_starts: Vec::with_capacity(257),
            labels: Batch::from_slots(Vec::new()),
            batch_local: Vec::with_capacity(64 * 256),
            local: Vec::with_capacity(64),
            rows: LocalRows::new(LOCAL_MIN_USES, LOCAL_RECOUNT_EVERY, LOCAL_MERGE_EVERY),
            copy_rows: false,
            training: false,
            vals: Vec::with_capacity(64 * (1 + max_dim)),
            in_place: false,
            offs: Vec::with_capacity(64),
            sum: padded(max_dim),
            sumsq: padded(max_dim),
            grad: padded(1 + max_dim),
            touched: Vec::new(),
            runs: Vec::with_capacity(16),
            scratch: vec![0.0; self.tables.iter().map(Table::stride).max().unwrap_or(0)],
            auc: Auc::default(),
        })
    }

    /// Hashes instance `i`'s ids into `w.feats` (and their values into `w.xs`).
    #[inline]
    fn gather(&self, w: &mut CtrWorker, batch: &Batch, i: usize) -> Result<()> {
        w.feats.clear();
        w.xs.clear();
        w.fields.clear();
        w.local.clear();
        if w.layout.plain {
            self.push_plain(&w.layout.fields, &mut w.feats, batch, i);
            return Ok(());
        }
        let features = (&mut w.feats, &mut w.xs, &mut w.fields);
        self.push_features(&w.layout, features, batch, i)
    }

    /// [`Ctr::push_features`] for fields without values or field numbers: nothing to check.
    #[inline]
    fn push_plain(
        &self,
        fields: &[Field],
        feats: &mut Vec<(usize, usize)>,
        batch: &Batch,
        i: usize,
    ) {
        for f in fields {
            for &id in batch.slots[f.at].u64s(i).unwrap_or(&[]) {
                feats.push((f.table, self.row_of(id, f.salt)));
            }
        }
    }

    /// The row id `id` hashes to with a field's `salt`.
    #[inline(always)]
    fn row_of(&self, id: u64, salt: u64) -> usize {
        ((u128::from(mix64(id ^ salt)) * self.cfg.buckets as u128) >> 64) as usize
    }

    /// Appends instance `i`'s features (table and hashed row) to `feats`, with `layout.valued`
    /// their values to `xs` (1 for a field without values), and with `layout.field_count`
    /// their field numbers to `fields`. Fails when a field's values or field numbers do not
    /// match its ids one to one, a value is not finite or a field number is out of range.
    #[inline]
    fn push_features(
        &self,
        layout: &Layout,
        (feats, xs, fields): Features<'_>,
        batch: &Batch,
        i: usize,
    ) -> Result<()> {
        // Each slot of values or field numbers is checked once per field and instance: the
        // per-id loops branch on nothing.
        for f in &layout.fields {
            let ids = batch.slots[f.at].u64s(i).unwrap_or(&[]);
            match f.numbers {
                None => self.push_plain(std::slice::from_ref(f), feats, batch, i),
                Some(at) => {
                    let numbers = batch.slots[at].u64s(i).unwrap_or(&[]);
                    layout.check_per_id(f, at, "field numbers", numbers.len(), ids.len(), i)?;
                    for (&id, &number) in ids.iter().zip(numbers) {
                        let (table, salt) = layout.numbered.get(number);
                        feats.push((table, self.row_of(id, salt)));
                    }
                }
            }
            if let Some(count) = layout.field_count {
                match f.numbers {
                    None => fields.resize(fields.len() + ids.len(), f.index),
                    Some(at) => {
                        let numbers = batch.slots[at].u64s(i).unwrap_or(&[]);
                        layout.check_field_numbers(at, numbers, ids, count, i)?;
                        fields.extend(numbers.iter().map(|&n| n as u32));
                    }
                }
            }
            if !layout.valued {
                continue;
            }
            match f.values {
                None => xs.resize(xs.len() + ids.len(), 1.0),
                Some(at) => {
                    let values = batch.slots[at].f32s(i).unwrap_or(&[]);
                    layout.check_per_id(f, at, "values", values.len(), ids.len(), i)?;
                    if let Some(k) = values.iter().position(|x| !x.is_finite()) {
                        return Err(Error::BadInstance {
                            slot: layout.slot_names[at].clone(),
                            instance: i,
                            reason: format!(
                                "value {} of id {} (position {k}) is not a finite number",
                                values[k], ids[k]
                            ),
                        });
                    }
                    xs.extend_from_slice(values);
                }
            }
        }
        Ok(())
    }

    /// Hashes every instance of `batch` into `w.batch_feats` (and `w.batch_xs`), for training
    /// copies the hot rows into `w.rows` (when `w.copy_rows`), and prefetches the rows of the
    /// first [`PREFETCH_INSTANCES`]. A bad instance fails the batch before anything is trained.
    fn gather_batch(&self, w: &mut CtrWorker, batch: &Batch, training: bool) -> Result<()> {
        w.start_batch(training);
        if w.layout.plain {
            for i in 0..batch.len {
                self.push_plain(&w.layout.fields, &mut w.batch_feats, batch, i);
                w.batch_starts.push(w.batch_feats.len());
            }
        } else {
            for i in 0..batch.len {
                let features = (&mut w.batch_feats, &mut w.batch_xs, &mut w.batch_fields);
                self.push_features(&w.layout, features, batch, i)?;
                w.batch_starts.push(w.batch_feats.len());
            }
        }
        self.plan_batch(w);
        Ok(())
    }

    /// Ends gathering a batch's features: in training, copies the hot rows into `w.rows` (when
    /// `w.copy_rows`); prefetches the rows of the first [`PREFETCH_INSTANCES`].
    fn plan_batch(&self, w: &mut CtrWorker) {
        let training = w.training;
        if training && w.copy_rows {
            w.rows.plan(
                &self.opt,
                &self.tables,
                w.batch_feats.iter().copied(),
                &mut w.batch_local,
            );
        }
        for i in 0..PREFETCH_INSTANCES.min(w.batch_starts.len() - 1) {
            self.prefetch_instance(w, i);
        }
    }

    /// Makes instance `i`'s features (from [`Ctr::gather_batch`]) current in `w.feats` (with
    /// `V`, their values in `w.xs`) and prefetches the rows of the instance
    /// [`PREFETCH_INSTANCES`] ahead: random rows of a table larger than the cache then arrive
    /// while the instances before them train.
    #[inline(always)]
    fn next_instance<const V: bool>(&self, w: &mut CtrWorker, i: usize) {
        let (a, b) = (w.batch_starts[i], w.batch_starts[i + 1]);
        w.feats.clear();
        w.feats.extend_from_slice(&w.batch_feats[a..b]);
        if V {
            w.xs.clear();
            w.xs.extend_from_slice(&w.batch_xs[a..b]);
        }
        if w.layout.field_count.is_some() {
            w.fields.clear();
            w.fields.extend_from_slice(&w.batch_fields[a..b]);
        }
        w.local.clear();
        if let Some(local) = w.batch_local.get(a..b) {
            w.local.extend_from_slice(local);
        }
        if i + PREFETCH_INSTANCES + 1 < w.batch_starts.len() {
            self.prefetch_instance(w, i + PREFETCH_INSTANCES);
        }
    }

    /// Prefetches the rows of instance `i` of the batch, to be read (the field-aware
    /// factorization machine's training reads their optimizer slots too, [`Ctr::ffm_forward`];
    /// the factorization machine's slots, prefetched, trained gss no faster): asking for them to be
    /// written ([`Table::prefetch_weights_to_write`], which word2vec gains by) made no difference
    /// on flights (LR and FM, 1 and 2 threads, 8 alternating rounds each), where the rows both
    /// threads keep writing are the frequent ones that [`LocalRows`] already keeps private.
    fn prefetch_instance(&self, w: &CtrWorker, i: usize) {
        let (a, b) = (w.batch_starts[i], w.batch_starts[i + 1]);
        for (k, &(t, row)) in w.batch_feats[a..b].iter().enumerate() {
            if w.batch_local.get(a + k).is_none_or(|&l| l == SHARED) {
                match w.training && self.kind == CtrKind::Ffm {
                    true => self.tables[t].prefetch_row(row),
                    false => self.tables[t].prefetch_weights(row),
                }
            }
        }
    }

    /// The logit of `w.feats`, reading their rows into `w.vals` and the sums of the factors
    /// times the features' values (`V`: `w.xs`; otherwise every value is 1 and the
    /// multiplications compile away) into `w.sum`, the squares' sums into `w.sumsq`.
    #[inline(always)]
    fn forward<const V: bool>(&self, w: &mut CtrWorker, bias: f32) -> f32 {
        w.vals.clear();
        for (k, &(t, row)) in w.feats.iter().enumerate() {
            let start = w.vals.len();
            let table = &self.tables[t];
            w.vals.resize(start + table.dim(), 0.0);
            match w.local.get(k) {
                Some(&l) if l != SHARED => {
                    w.vals[start..].copy_from_slice(w.rows.weights(l, table.dim()));
                }
                _ => table.read_weights(row, &mut w.vals[start..]),
            }
        }
        let mut logit = bias;
        w.sum.fill(0.0);
        w.sumsq.fill(0.0);
        let mut at = 0;
        for (k, &(t, _)) in w.feats.iter().enumerate() {
            let x = if V { w.xs[k] } else { 1.0 };
            let d = self.dims[t];
            logit += x * w.vals[at];
            let v = &w.vals[at + 1..at + 1 + d];
            for ((s, q), &vk) in w.sum.iter_mut().zip(w.sumsq.iter_mut()).zip(v) {
                let xv = x * vk;
                *s += xv;
                *q += xv * xv;
            }
            at += 1 + d;
        }
        let pairs: f32 = w.sum.iter().zip(&w.sumsq).map(|(s, q)| s * s - q).sum();
        logit + 0.5 * pairs
    }

    /// Applies one instance's gradient `g` (`p - y`, times the instance's weight) to its rows,
    /// with the L2 penalty `l2` (times the weight), and `g` to the worker's copy of the bias. A
    /// feature of value `x` (`V`) gets `g x` for its weight and `g x (sum_k - x v_k)` for its
    /// factor `k`.
    #[inline(always)]
    fn update<const V: bool>(
        &self,
        w: &mut CtrWorker,
        steps: &Steps<O::Step>,
        bias: &mut LocalBias,
        g: f32,
        l2: f32,
    ) {
        let mut at = 0;
        for (f, &(t, row)) in w.feats.iter().enumerate() {
            let x = if V { w.xs[f] } else { 1.0 };
            let gx = g * x;
            let d = self.dims[t];
            let vals = &w.vals[at..at + 1 + d];
            w.grad[0] = gx + l2 * vals[0];
            for k in 0..d {
                let v = vals[1 + k];
                w.grad[1 + k] = gx * (w.sum[k] - x * v) + l2 * v;
            }
            let grad = &w.grad[..1 + d];
            match w.local.get(f) {
                Some(&l) if l != SHARED => {
                    w.rows
                        .update_row(&self.opt, &steps.tables[t], l, 1 + d, grad);
                }
                // In place, element by element: a row of 1 + dim weights copied onto the stack
                // and stepped several elements at a time (the same bits) measured a fifth slower
                // at FM's widths (gss, dim 8), where FFM's wider rows gain by it.
                _ => self.tables[t].update_row(&self.opt, &steps.tables[t], row, grad, 1.0),
            }
            at += 1 + d;
        }
        self.step_bias(steps, bias, g);
    }

    /// Applies gradient `g` to the worker's copy of the bias.
    #[inline(always)]
    fn step_bias(&self, steps: &Steps<O::Step>, bias: &mut LocalBias, g: f32) {
        let (weight, slots) = bias.now.split_at_mut(1);
        self.opt
            .element(&steps.bias, &mut weight[0], &mut slots[..O::SLOTS], g);
    }

    /// Which instance loop a batch runs ([`Ctr::logit`]'s `F`): [`NOT_FFM`] for logistic
    /// regression and the factorization machine, else the field-aware factorization machine's
    /// factor size where it has a loop of its own (xLearn's default 4, and 8), or 0.
    fn loop_kind(&self) -> usize {
        match (self.kind, self.dims[0]) {
            (CtrKind::Lr | CtrKind::Fm, _) => NOT_FFM,
            (CtrKind::Ffm, k @ (4 | 8)) => k,
            (CtrKind::Ffm, _) => 0,
        }
    }

    /// [`Ctr::logit`] for the model's own loop kind, chosen per call (one prediction).
    fn logit_any<const V: bool>(&self, w: &mut CtrWorker, bias: f32) -> f32 {
        match self.loop_kind() {
            NOT_FFM => self.logit::<V, NOT_FFM>(w, bias),
            4 => self.logit::<V, 4>(w, bias),
            8 => self.logit::<V, 8>(w, bias),
            _ => self.logit::<V, 0>(w, bias),
        }
    }

    /// The logit of the current instance: [`Ctr::forward`] when `F` is [`NOT_FFM`], else
    /// [`Ctr::ffm_forward`] compiled for factor size `F` (0: any). The instance loops are
    /// compiled once per `F`, chosen once per batch ([`Ctr::loop_kind`]), so that each model's
    /// loop holds its own code alone.
    #[inline(always)]
    fn logit<const V: bool, const F: usize>(&self, w: &mut CtrWorker, bias: f32) -> f32 {
        if F == NOT_FFM {
            self.forward::<V>(w, bias)
        } else {
            self.ffm_forward::<V, F>(w, bias)
        }
    }

    /// The worker's copy of the bias and its slots, as the shared table holds them now.
    fn local_bias(&self) -> LocalBias {
        let mut start = [0.0f32; 1 + MAX_SLOTS];
        for (i, (x, cell)) in start.iter_mut().zip(self.bias.row(0)).enumerate() {
            *x = element_value(&self.opt, self.bias.dim(), i, cell.load());
        }
        LocalBias { start, now: start }
    }

    /// Adds the change of the worker's copy since [`Ctr::local_bias`] to the shared bias.
    fn merge_bias(&self, bias: &LocalBias) {
        let cells = self.bias.row(0).iter().zip(&bias.now).zip(&bias.start);
        for (i, ((cell, &now), &start)) in cells.enumerate() {
            let delta = now - start;
            if delta != 0.0 {
                cell.update(|x| element_value(&self.opt, self.bias.dim(), i, x) + delta);
            }
        }
    }

    fn begin(&self) -> Result<Steps<O::Step>> {
        Ok(Steps {
            tables: self
                .tables
                .iter()
                .map(|t| t.begin(&self.opt, true))
                .collect::<Result<Vec<_>>>()?,
            bias: self.bias.begin(&self.opt, false)?,
        })
    }

    fn finish(&self, rows: &[usize], instances: usize) {
        for (t, &n) in self.tables.iter().zip(rows) {
            t.finish(&self.opt, true, n);
        }
        self.bias.finish(&self.opt, false, instances);
    }

    /// Instance `i`'s label (0 or 1).
    #[inline]
    fn label(&self, batch: &Batch, (at, kind): (usize, SlotType), i: usize) -> Result<f32> {
        let bad = |reason: String| Error::BadInstance {
            slot: self.cfg.label_slot.clone(),
            instance: i,
            reason,
        };
        match kind {
            SlotType::U64 => match batch.slots[at].u64s(i).unwrap_or(&[]) {
                [0] => Ok(0.0),
                [1] => Ok(1.0),
                [y] => Err(bad(format!("label {y} is not 0 or 1"))),
                v => Err(bad(format!("expected one label, got {} values", v.len()))),
            },
            SlotType::F32 => match batch.slots[at].f32s(i).unwrap_or(&[]) {
                [y] if y.is_finite() => Ok(f32::from(u8::from(*y > 0.0))),
                [y] => Err(bad(format!("label {y} is not a finite number"))),
                v => Err(bad(format!("expected one label, got {} values", v.len()))),
            },
        }
    }

    /// Instance `i`'s importance weight: 1 without a weight slot.
    #[inline(always)]
    fn weight(&self, w: &CtrWorker, batch: &Batch, i: usize) -> Result<f32> {
        let Some(at) = w.weight_at else {
            return Ok(1.0);
        };
        let bad = |reason: String| Error::BadInstance {
            slot: w.layout.slot_names[at].clone(),
            instance: i,
            reason,
        };
        match batch.slots[at].f32s(i).unwrap_or(&[]) {
            [x] if x.is_finite() && *x >= 0.0 => Ok(*x),
            [x] => Err(bad(format!("weight {x} is not a finite number >= 0"))),
            v => Err(bad(format!("expected one weight, got {} values", v.len()))),
        }
    }

    /// The click probability of instance `i` of `batch` (after [`Ctr::new_worker`]). Fails as
    /// a batch does when the instance's values or field numbers do not fit its ids.
    pub fn predict(&self, w: &mut CtrWorker, batch: &Batch, i: usize) -> Result<f32> {
        self.gather(w, batch, i)?;
        let bias = self.bias.weights(0)[0].load();
        let logit = match w.layout.valued {
            true => self.logit_any::<true>(w, bias),
            false => self.logit_any::<false>(w, bias),
        };
        Ok(sigmoid(logit))
    }

    /// Trains the gathered instances of `batch` in turn (`V`: the features have values); adds
    /// each applied instance's use of a table to `rows`. Returns the sum of the instances'
    /// weighted losses, the sum of their weights and how many were applied (an instance of
    /// weight 0 is not), or the first bad label or weight, after applying the instances before.
    /// `batch` holds the labels and weights (a referred batch's are in `w.labels` instead,
    /// checked: [`Ctr::gather_prepared`]).
    fn train_instances<const V: bool, const F: usize>(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        label_at: (usize, SlotType),
        steps: &Steps<O::Step>,
        bias: &mut LocalBias,
        rows: &mut [usize],
    ) -> Result<Sums> {
        let mut sums = Sums::default();
        for i in 0..batch.len {
            let y = self.label(batch, label_at, i)?;
            let weight = self.weight(w, batch, i)?;
            if weight == 0.0 {
                continue;
            }
            self.next_instance::<V>(w, i);
            let logit = self.logit::<V, F>(w, bias.now[0]);
            sums.loss += f64::from(weight * logloss(logit, y));
            sums.weight += f64::from(weight);
            sums.applied += 1;
            let (g, l2) = (weight * (sigmoid(logit) - y), weight * self.cfg.l2);
            if F == NOT_FFM {
                self.update::<V>(w, steps, bias, g, l2);
            } else {
                self.ffm_update::<V, F>(w, steps, bias, g, l2);
            }
            for &(t, _) in &w.feats {
                rows[t] += 1;
            }
        }
        Ok(sums)
    }

    /// Evaluates the gathered instances of `batch` (`V`: the features have values): collects
    /// the (logit, label) pairs of the instances of positive weight and appends one probability
    /// per instance to `predictions`. Returns the weighted losses' and the weights' sums.
    fn eval_instances<const V: bool, const F: usize>(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        mut predictions: Option<&mut String>,
    ) -> Result<Sums> {
        let mut sums = Sums::default();
        let bias = self.bias.weights(0)[0].load();
        for i in 0..batch.len {
            self.next_instance::<V>(w, i);
            let logit = self.logit::<V, F>(w, bias);
            if let Some(label_at) = w.label_at {
                let y = self.label(batch, label_at, i)?;
                let weight = self.weight(w, batch, i)?;
                if weight > 0.0 {
                    sums.loss += f64::from(weight * logloss(logit, y));
                    sums.weight += f64::from(weight);
                    w.auc.push(logit, y > 0.5);
                }
            }
            if let Some(text) = predictions.as_deref_mut() {
                use std::fmt::Write as _;
                let _ = writeln!(text, "{:.6}", sigmoid(logit));
            }
        }
        Ok(sums)
    }
}

/// What a batch's instances add up to: their weighted losses, their weights and (in training)
/// how many were applied.
#[derive(Debug, Default)]
struct Sums {
    loss: f64,
    weight: f64,
    applied: usize,
}

impl Sums {
    /// The weighted mean loss `sum(weight * loss) / sum(weight)`: VW's average loss, the plain
    /// mean without weights; 0 when no instance weighs anything.
    fn mean_loss(&self) -> f64 {
        if self.weight > 0.0 {
            self.loss / self.weight
        } else {
            0.0
        }
    }
}

/// A worker's private copy of the bias cell and its optimizer slots during a batch.
struct LocalBias {
    /// The shared values when the batch started.
    start: [f32; 1 + MAX_SLOTS],
    /// The copy, stepped instance by instance.
    now: [f32; 1 + MAX_SLOTS],
}

/// Rows a counted training batch uses at least this often are hot: stepped on the worker's
/// private copy and written back every [`LOCAL_MERGE_EVERY`] batches (see [`LocalRows`]).
const LOCAL_MIN_USES: u32 = 4;

/// The least share of a batch's uses on hot rows for a field-aware machine's lone worker to
/// copy them ([`LocalRows::set_min_share`]). Its rows are wide (a block per field), and each
/// shared one is copied in and out by atomic 16-byte moves and prefetched line by line, which
/// a copy spares; but each feature then costs a lookup. Copying trained flights and gss,
/// where nearly every field is of low cardinality, faster at 1 thread, and MovieLens, whose
/// users and movies are rarely hot in a batch, slower.
const LOCAL_ALONE_MIN_SHARE: f32 = 0.5;

/// A worker writes its copies of the hot rows back once every this many batches (and when
/// flushed): each load and merge moves their cache lines between the cores.
const LOCAL_MERGE_EVERY: u32 = 4;

/// A worker counts its batch's uses of each row (to find the hot rows) in one batch of this
/// many, the first included; the batches between copy the rows found hot in the last count.
const LOCAL_RECOUNT_EVERY: u32 = 64;

/// [`Ctr::loop_kind`] of the models that are not field-aware factorization machines: a
/// factor size no field-aware loop is compiled for (size 1 runs the general one, 0), and a
/// small one, as the compiler still builds the field-aware code it never runs for it.
const NOT_FFM: usize = 1;

/// How many instances ahead of the one training [`Ctr`] prefetches rows: an instance takes a
/// few hundred nanoseconds, about one memory latency.
const PREFETCH_INSTANCES: usize = 2;

#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The logistic loss of `logit` for label `y`: `log(1 + exp(z)) - y z`, computed stably.
#[inline(always)]
pub(crate) fn logloss(logit: f32, y: f32) -> f32 {
    logit.max(0.0) + (-logit.abs()).exp().ln_1p() - y * logit
}

const METRICS: &[&str] = &["loss"];

impl<O: Optimizer<f32> + OptimizerDesc> Model for Ctr<O> {
    type Worker = CtrWorker;

    /// `loss`: the mean logistic loss per instance (before each instance's update in training),
    /// weighted by the instances' importance weights with a `weight_slot`.
    fn metrics(&self) -> Vec<String> {
        METRICS.iter().map(|s| s.to_string()).collect()
    }

    fn startup(&self) {
        self.init();
    }

    fn worker(&self, desc: &DataFeedDesc) -> Result<CtrWorker> {
        self.new_worker(desc)
    }

    /// The factorization machines' workers of several threads step private copies of the rows
    /// a batch uses often (see the module documentation). A lone worker has no one to share
    /// the rows with: a factorization machine's updates them in place, and a field-aware
    /// one's copies its hot rows only where they take most of a batch's uses
    /// (`LOCAL_ALONE_MIN_SHARE`).
    fn workers(&self, desc: &DataFeedDesc, threads: usize) -> Result<Vec<CtrWorker>> {
        (0..threads)
            .map(|_| {
                let mut w = self.new_worker(desc)?;
                let (copy, share) = match (self.kind, threads) {
                    (CtrKind::Lr, _) | (CtrKind::Fm, 1) => (false, 0.0),
                    (CtrKind::Ffm, 1) => (true, LOCAL_ALONE_MIN_SHARE),
                    _ => (true, 0.0),
                };
                w.copy_rows = copy;
                w.rows.set_min_share(share);
                Ok(w)
            })
            .collect()
    }

    fn train_batch(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        out: &mut [f64],
        stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        let label_at = self.cfg.training_label(w.label_at, w.weight_at)?;
        let t0 = stages.as_ref().map(|_| Instant::now());
        let steps = self.begin()?;
        let mut rows = vec![0usize; self.tables.len()];
        // A referred batch holds no values: its features come from the prepared dataset, and
        // its labels and weights in a batch of the worker's own, so that every batch trains
        // through the same instance loop (a second way of reading labels in that loop, or
        // instantiating it twice, changed how the compiler vectorized FFM's pair step).
        let referred = batch.is_referred();
        let labels = match referred {
            true => {
                self.gather_prepared(w, &*self.prepared_for(batch)?, batch, label_at);
                std::mem::replace(&mut w.labels, Batch::from_slots(Vec::new()))
            }
            false => {
                self.gather_batch(w, batch, true)?;
                Batch::from_slots(Vec::new())
            }
        };
        let from = if referred { &labels } else { batch };
        let mut bias = self.local_bias();
        // One loop per model and factor size (`Ctr::loop_kind`), and without values the
        // per-feature loops are the plain ones: the branches are taken once per batch.
        let (st, lb, used) = (&steps, &mut bias, &mut rows[..]);
        let result = match (w.layout.valued, self.loop_kind()) {
            (true, NOT_FFM) => {
                self.train_instances::<true, NOT_FFM>(w, from, label_at, st, lb, used)
            }
            (true, 4) => self.train_instances::<true, 4>(w, from, label_at, st, lb, used),
            (true, 8) => self.train_instances::<true, 8>(w, from, label_at, st, lb, used),
            (true, _) => self.train_instances::<true, 0>(w, from, label_at, st, lb, used),
            (false, NOT_FFM) => {
                self.train_instances::<false, NOT_FFM>(w, from, label_at, st, lb, used)
            }
            (false, 4) => self.train_instances::<false, 4>(w, from, label_at, st, lb, used),
            (false, 8) => self.train_instances::<false, 8>(w, from, label_at, st, lb, used),
            (false, _) => self.train_instances::<false, 0>(w, from, label_at, st, lb, used),
        };
        if referred {
            w.labels = labels;
        }
        // The instances before a bad one were applied to their rows: their bias steps too (the
        // executor flushes the copies when the failing thread stops).
        w.rows.end_batch(&self.opt, &self.tables);
        self.merge_bias(&bias);
        let applied = result.as_ref().map_or(batch.len, |sums| sums.applied);
        self.finish(&rows, applied);
        let sums = result?;
        if let (Some(st), Some(t0)) = (stages, t0) {
            // Forward, backward and update are fused per instance: all of it counts as update.
            st.update += t0.elapsed();
        }
        out[0] = sums.mean_loss();
        Ok(())
    }

    fn eval_batch(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        out: &mut [f64],
        predictions: Option<&mut String>,
    ) -> Result<()> {
        // Evaluation reads the shared rows: this worker's training changes first.
        w.rows.merge(&self.opt, &self.tables);
        self.gather_batch(w, batch, false)?;
        let sums = match (w.layout.valued, self.loop_kind()) {
            (true, NOT_FFM) => self.eval_instances::<true, NOT_FFM>(w, batch, predictions)?,
            (true, 4) => self.eval_instances::<true, 4>(w, batch, predictions)?,
            (true, 8) => self.eval_instances::<true, 8>(w, batch, predictions)?,
            (true, _) => self.eval_instances::<true, 0>(w, batch, predictions)?,
            (false, NOT_FFM) => self.eval_instances::<false, NOT_FFM>(w, batch, predictions)?,
            (false, 4) => self.eval_instances::<false, 4>(w, batch, predictions)?,
            (false, 8) => self.eval_instances::<false, 8>(w, batch, predictions)?,
            (false, _) => self.eval_instances::<false, 0>(w, batch, predictions)?,
        };
        out[0] = match w.label_at {
            Some(_) => sums.mean_loss(),
            None => f64::NAN,
        };
        Ok(())
    }

    /// The checks of [`Model::train_batch`]: the features' values and field numbers against
    /// their ids, then the label and the weight.
    fn check_instance(&self, w: &mut CtrWorker, batch: &Batch, i: usize) -> Result<()> {
        if !w.layout.plain {
            w.batch_feats.clear();
            w.batch_xs.clear();
            w.batch_fields.clear();
            let features = (&mut w.batch_feats, &mut w.batch_xs, &mut w.batch_fields);
            self.push_features(&w.layout, features, batch, i)?;
        }
        if let Some(label_at) = w.label_at {
            self.label(batch, label_at, i)?;
            self.weight(w, batch, i)?;
        }
        Ok(())
    }

    fn check_metrics_desc(&self, desc: &DataFeedDesc) -> Result<()> {
        match desc
            .used_slots()
            .iter()
            .any(|s| s.name == self.cfg.label_slot)
        {
            true => Ok(()),
            false => Err(super::missing_label(&self.cfg.label_slot)),
        }
    }

    fn flush(&self, w: &mut CtrWorker) {
        w.rows.merge(&self.opt, &self.tables);
    }

    /// Hashes and checks every record once for the run (`ctr/prepared.rs`), unless the copy
    /// would crowd the machine's memory.
    fn prepare_dataset(
        &self,
        desc: &DataFeedDesc,
        data: &InMemoryDataset,
        threads: usize,
    ) -> Result<Option<usize>> {
        let prepared = self.prepare(desc, data, threads)?;
        let kept = prepared.as_ref().map(|p| p.byte_size());
        self.keep_prepared(prepared);
        Ok(kept)
    }

    fn release_dataset(&self) {
        self.keep_prepared(None);
    }

    fn tables(&self) -> Vec<&Table> {
        self.tables
            .iter()
            .chain(std::iter::once(&self.bias))
            .collect()
    }

    fn describe(&self) -> String {
        let model = match self.kind {
            CtrKind::Lr => ModelKind::Lr(self.cfg.clone()),
            CtrKind::Fm => ModelKind::Fm(self.cfg.clone()),
            CtrKind::Ffm => ModelKind::Ffm(self.cfg.clone()),
        };
        ModelConfig {
            model,
            optimizer: self.opt.describe(),
        }
        .to_toml()
    }

    /// The evaluated instances' (logit, label) pairs, from which the executor reports `auc`:
    /// the exact AUC over every thread's instances (the logit ranks as the click probability
    /// does, without the ties of a saturated sigmoid). Training collects none: it would hold one
    /// pair per training instance of the epoch.
    fn auc<'w>(&self, w: &'w mut CtrWorker) -> Option<&'w mut Auc> {
        Some(&mut w.auc)
    }
}

mod ffm;
mod prepared;
#[cfg(test)]
mod tests;
