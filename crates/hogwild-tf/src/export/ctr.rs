//! The CTR models (`hogwild::models::Ctr`: logistic regression, factorization machine,
//! field-aware factorization machine) as serving graphs: each field's ids hashed with the field's
//! salt (or their field number's) into the same rows, with the same values, through the same
//! logit: `b + sum x w + 0.5 sum_k ((sum x v_k)^2 - sum x^2 v_k^2)`, or the field-aware
//! `b + sqrt(n) sum x w + n sum_{i<j} <v_{i,f_j}, v_{j,f_i}> x_i x_j`.

use std::collections::BTreeMap;

use hogwild::feed::SlotType;
use hogwild::models::{CtrConfig, CtrKind};
use hogwild::rng::{fnv1a64, mix64};
use hogwild::{DataFeedDesc, Table};
use tensorflow::{DataType, Output};

use super::checkpoint::{self, Named};
use super::graph::{Builder, Ragged};
use super::hash;
use crate::{Error, Result};

/// The factorization machines' factor sizes when the configuration gives none (the native
/// `DEFAULT_DIM` and `DEFAULT_FFM_DIM`; the tables' widths are checked against them).
const DEFAULT_FM_DIM: usize = 8;
const DEFAULT_FFM_DIM: usize = 4;

/// What the export reads of a CTR model, whatever its optimizer, and the DataFeedDesc whose
/// slots make its fields when the configuration does not list them.
pub struct CtrParts<'a> {
    /// Logistic regression, factorization machine or field-aware factorization machine.
    pub kind: CtrKind,
    /// The settings the graph follows: fields, value and field-number slots, buckets, factor
    /// sizes.
    pub config: &'a CtrConfig,
    /// One table per factor size, ascending (`Ctr::feature_tables`): `buckets` rows of a weight
    /// then the factors (one block of them per field for FFM); each is a float32 variable and
    /// checkpoint tensor of the table's name.
    pub tables: &'a [Table],
    /// The bias table, one row of one float (the checkpoint's `bias`).
    pub bias: &'a Table,
    /// The data feed description the model trains on: its used `uint64` slots other than the
    /// label slot are the fields when the configuration lists none, and the slots become the
    /// signature's inputs.
    pub desc: &'a DataFeedDesc,
}

/// One field: its slot, the slots of its values and field numbers, its table, salt and number.
struct Field {
    slot: String,
    values: Option<String>,
    numbers: Option<String>,
    table: usize,
    salt: u64,
    index: i64,
}

fn bad(field: String, reason: String) -> Error {
    Error::Hogwild(hogwild::Error::InvalidConfig { field, reason })
}

/// The fields as the native model reads them from `desc` (`CtrConfig::slots`).
fn fields(m: &CtrParts<'_>, dims: &[usize]) -> Result<Vec<Field>> {
    let cfg = m.config;
    let used = m.desc.used_slots();
    let names: Vec<String> = if cfg.fields.is_empty() {
        let numbers: Vec<&String> = cfg.field_numbers.values().collect();
        used.iter()
            .filter(|s| s.name != cfg.label_slot && s.slot_type() == SlotType::U64)
            .filter(|s| !numbers.contains(&&s.name))
            .map(|s| s.name.clone())
            .collect()
    } else {
        cfg.fields.clone()
    };
    let default = default_dim(m.kind, cfg);
    names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let dim = cfg.field_dims.get(name).copied().unwrap_or(default);
            Ok(Field {
                slot: name.clone(),
                values: cfg.values.get(name).cloned(),
                numbers: cfg.field_numbers.get(name).cloned(),
                table: table_of(dims, dim, name)?,
                salt: mix64(fnv1a64(name.as_bytes())),
                index: index as i64,
            })
        })
        .collect()
}

fn default_dim(kind: CtrKind, cfg: &CtrConfig) -> usize {
    match kind {
        CtrKind::Lr => 0,
        CtrKind::Fm => cfg.dim.unwrap_or(DEFAULT_FM_DIM),
        CtrKind::Ffm => cfg.dim.unwrap_or(DEFAULT_FFM_DIM),
    }
}

fn table_of(dims: &[usize], dim: usize, what: &str) -> Result<usize> {
    dims.iter().position(|&d| d == dim).ok_or_else(|| {
        bad(
            format!("field_dims.{what}"),
            format!("the model has no table of factor size {dim} (its sizes: {dims:?})"),
        )
    })
}

/// The features of every field, concatenated in field order (the native order).
struct Features {
    rows: Vec<Output>,
    tables: Vec<Output>,
    xs: Vec<Output>,
    numbers: Vec<Output>,
    instances: Vec<Output>,
    positions: Vec<Output>,
}

/// The forward pass: each feature's instance, value, row, table and row values (padded to the
/// widest table), and each instance's logit (with the factor sums of the factorization
/// machine, which its gradients read).
pub(crate) struct Forward {
    pub(crate) instances: Output,
    pub(crate) owner: Output,
    pub(crate) x: Output,
    pub(crate) rows: Output,
    pub(crate) table_ids: Output,
    pub(crate) vals: Output,
    pub(crate) logit: Output,
    pub(crate) sum: Option<Output>,
    /// The field-aware machine's pair layout.
    pub(crate) ffm: Option<FfmParts>,
    /// Factor size of each table.
    pub(crate) dims: Vec<usize>,
    pub(crate) width: usize,
}

/// The serving graph's signature and the tensors of its checkpoint.
pub(crate) fn build(b: &mut Builder, m: &CtrParts<'_>) -> Result<Vec<Named>> {
    let f = forward(b, m)?;
    let p = b.op("Sigmoid", "ctr/probability", &[&f.logit])?;
    b.output("probability", &p, DataType::Float, &[-1])?;
    let mut tensors = Vec::new();
    for table in m.tables.iter().chain(std::iter::once(m.bias)) {
        let mut values = vec![0f32; table.rows() * table.dim()];
        for (r, row) in values.chunks_exact_mut(table.dim()).enumerate() {
            table.read_weights(r, row);
        }
        tensors.push(checkpoint::matrix(
            table.name(),
            &[table.rows() as u64, table.dim() as u64],
            values,
        )?);
    }
    Ok(tensors)
}

/// The forward pass of a CTR model, reading one variable per table and `bias`.
pub(crate) fn forward(b: &mut Builder, m: &CtrParts<'_>) -> Result<Forward> {
    let cfg = m.config;
    let ffm = m.kind == CtrKind::Ffm;
    let blocks = if ffm {
        cfg.num_fields.unwrap_or(cfg.fields.len())
    } else {
        1
    };
    // Factor size of each table, as the native model sizes them.
    let dims: Vec<usize> = m
        .tables
        .iter()
        .map(|t| (t.dim() - 1) / blocks.max(1))
        .collect();
    let fields = fields(m, &dims)?;
    let buckets = cfg.buckets as u64;
    let mut inputs: BTreeMap<String, Ragged> = BTreeMap::new();
    let mut input = |b: &mut Builder, slot: &str, dtype: DataType| -> Result<Ragged> {
        if let Some(r) = inputs.get(slot) {
            return Ok(r.clone());
        }
        let r = b.ragged_input(slot, dtype)?;
        inputs.insert(slot.to_string(), r.clone());
        Ok(r)
    };
    let mut f = Features {
        rows: Vec::new(),
        tables: Vec::new(),
        xs: Vec::new(),
        numbers: Vec::new(),
        instances: Vec::new(),
        positions: Vec::new(),
    };
    let numbered_tables: Vec<(u64, usize)> = cfg
        .field_dims
        .iter()
        .filter_map(|(key, &dim)| {
            let n = key.parse::<u64>().ok().filter(|n| n.to_string() == *key)?;
            Some(table_of(&dims, dim, key).map(|t| (n, t)))
        })
        .collect::<Result<_>>()?;
    let default_table = table_of(&dims, default_dim(m.kind, cfg), "(default)")?;
    let mut instances: Option<Output> = None;
    let mut before: Option<Output> = None;
    for field in &fields {
        let p = format!("fields/{}", field.slot);
        let ids = input(b, &field.slot, DataType::Int64)?;
        instances.get_or_insert_with(|| ids.rows.clone());
        let uids = hash::to_u64(b, &format!("{p}/ids"), &ids.values)?;
        let (salt, table, number) = match &field.numbers {
            None => {
                let salt = b.scalar(&format!("{p}/salt"), field.salt)?;
                let ones = b.op("OnesLike", &format!("{p}/ones"), &[&ids.values])?;
                let t = b.scalar(&format!("{p}/table"), field.table as i64)?;
                let table = b.op("Mul", &format!("{p}/tables"), &[&ones, &t])?;
                let n = b.scalar(&format!("{p}/number"), field.index)?;
                let number = b.op("Mul", &format!("{p}/numbers"), &[&ones, &n])?;
                (salt, table, number)
            }
            Some(slot) => {
                let numbers = input(b, slot, DataType::Int64)?;
                let same = b.op(
                    "Equal",
                    &format!("{p}/numbers_fit"),
                    &[&numbers.splits, &ids.splits],
                )?;
                let message = format!(
                    "slot {slot}: the field numbers of slot {} are not one per id",
                    field.slot
                );
                let mut values = b.checked(
                    &format!("{p}/field_numbers"),
                    &numbers.values,
                    &same,
                    &message,
                )?;
                if ffm {
                    let count = b.scalar(&format!("{p}/num_fields"), blocks as i64)?;
                    let zero = b.scalar(&format!("{p}/zero"), 0i64)?;
                    let low = b.op(
                        "GreaterEqual",
                        &format!("{p}/number_low"),
                        &[&values, &zero],
                    )?;
                    let high = b.op("Less", &format!("{p}/number_high"), &[&values, &count])?;
                    let ok = b.op("LogicalAnd", &format!("{p}/number_ok"), &[&low, &high])?;
                    let message = format!(
                        "slot {slot}: a field number is out of range: the model has \
                         num_fields = {blocks} (fields 0 to {})",
                        blocks - 1
                    );
                    values = b.checked(
                        &format!("{p}/field_numbers_checked"),
                        &values,
                        &ok,
                        &message,
                    )?;
                }
                let unumbers = hash::to_u64(b, &format!("{p}/numbers_u64"), &values)?;
                let salt = hash::number_salt(b, &format!("{p}/number_salt"), &unumbers)?;
                let ones = b.op("OnesLike", &format!("{p}/ones"), &[&values])?;
                let t = b.scalar(&format!("{p}/default_table"), default_table as i64)?;
                let mut table = b.op("Mul", &format!("{p}/tables"), &[&ones, &t])?;
                for &(n, t) in &numbered_tables {
                    let n_c = b.scalar(&format!("{p}/sized_{n}"), n as i64)?;
                    let is = b.op("Equal", &format!("{p}/is_{n}"), &[&values, &n_c])?;
                    let t_c = b.scalar(&format!("{p}/table_{n}"), t as i64)?;
                    let t_v = b.op("Mul", &format!("{p}/table_of_{n}"), &[&ones, &t_c])?;
                    table = b.op("SelectV2", &format!("{p}/tables_{n}"), &[&is, &t_v, &table])?;
                }
                (salt, table, values)
            }
        };
        let rows = hash::row_of_salt(b, &format!("{p}/hash"), &uids, &salt, buckets)?;
        let rows = hash::to_i64(b, &format!("{p}/rows"), &rows)?;
        let x = match &field.values {
            None => {
                let ones = b.op("OnesLike", &format!("{p}/ones_i"), &[&ids.values])?;
                b.op_typed("Cast", &format!("{p}/x"), &[&ones], "DstT", DataType::Float)?
            }
            Some(slot) => {
                let values = input(b, slot, DataType::Float)?;
                let same = b.op(
                    "Equal",
                    &format!("{p}/values_fit"),
                    &[&values.splits, &ids.splits],
                )?;
                let message = format!(
                    "slot {slot}: the values of slot {} are not one per id",
                    field.slot
                );
                let checked = b.checked(&format!("{p}/values"), &values.values, &same, &message)?;
                let finite = b.op("IsFinite", &format!("{p}/finite"), &[&checked])?;
                let message = format!("slot {slot}: a value is not a finite number");
                b.checked(&format!("{p}/x"), &checked, &finite, &message)?
            }
        };
        if ffm {
            // Each feature's place among its instance's features: after the earlier fields'.
            let lengths = lengths(b, &p, &ids)?;
            let zero = b.scalar(&format!("{p}/zero_i"), 0i64)?;
            let one = b.scalar(&format!("{p}/one_i"), 1i64)?;
            let count = b.node("Size", &format!("{p}/count"), &[&ids.values], |nd| {
                nd.set_attr_type("out_type", DataType::Int64)
            })?;
            let at = b.op("Range", &format!("{p}/at"), &[&zero, &count.into(), &one])?;
            let start = b.gather(&format!("{p}/start"), &ids.splits, &ids.segments)?;
            let mut pos = b.op("Sub", &format!("{p}/in_field"), &[&at, &start])?;
            if let Some(before) = &before {
                let shift = b.gather(&format!("{p}/earlier"), before, &ids.segments)?;
                pos = b.op("AddV2", &format!("{p}/position"), &[&pos, &shift])?;
            }
            before = Some(match before {
                None => lengths,
                Some(prev) => b.op("AddV2", &format!("{p}/through"), &[&prev, &lengths])?,
            });
            f.positions.push(pos);
        }
        f.rows.push(rows);
        f.tables.push(table);
        f.xs.push(x);
        f.numbers.push(number);
        f.instances.push(ids.segments.clone());
    }
    let instances =
        instances.ok_or_else(|| bad("fields".into(), "the model reads no field".into()))?;
    let rows = b.concat("features/rows", &f.rows, 0)?;
    let table_ids = b.concat("features/tables", &f.tables, 0)?;
    let x = b.concat("features/x", &f.xs, 0)?;
    let owner = b.concat("features/instance", &f.instances, 0)?;

    // Each feature's row, as wide as the widest table (narrower tables' factors padded with
    // zeros, which add nothing: component k is shared by the features whose size exceeds k).
    let width = m.tables.iter().map(Table::dim).max().unwrap_or(1);
    let mut vals: Option<Output> = None;
    for (t, table) in m.tables.iter().enumerate() {
        let name = table.name().to_string();
        let var = b.variable(&name, &[table.rows() as u64, table.dim() as u64], true)?;
        let mut v = b.gather(&format!("features/{name}"), &var, &rows)?;
        if table.dim() < width {
            let pad = b.matrix(
                &format!("features/{name}_pad"),
                &[2, 2],
                &[0i64, 0, 0, (width - table.dim()) as i64],
            )?;
            v = b.op("Pad", &format!("features/{name}_padded"), &[&v, &pad])?;
        }
        if m.tables.len() > 1 {
            let t_c = b.scalar(&format!("features/is_{name}/t"), t as i64)?;
            let is = b.op("Equal", &format!("features/is_{name}"), &[&table_ids, &t_c])?;
            let is = b.op_typed(
                "Cast",
                &format!("features/in_{name}"),
                &[&is],
                "DstT",
                DataType::Float,
            )?;
            let axis = b.scalar(&format!("features/in_{name}/axis"), 1i32)?;
            let is = b.op(
                "ExpandDims",
                &format!("features/in_{name}_column"),
                &[&is, &axis],
            )?;
            v = b.op("Mul", &format!("features/{name}_rows"), &[&v, &is])?;
        }
        vals = Some(match vals {
            None => v,
            Some(prev) => b.op("AddV2", &format!("features/with_{name}"), &[&prev, &v])?,
        });
    }
    let vals = vals.ok_or_else(|| bad("buckets".into(), "the model has no table".into()))?;
    let bias_var = b.variable("bias", &[1, 1], true)?;
    let scalar_shape = b.vector("ctr/scalar", &[0i64; 0])?;
    let bias = b.op("Reshape", "ctr/bias", &[&bias_var, &scalar_shape])?;

    let begin = b.vector("ctr/w_begin", &[0i64, 0])?;
    let size = b.vector("ctr/w_size", &[-1i64, 1])?;
    let w = b.op("Slice", "ctr/w_column", &[&vals, &begin, &size])?;
    let flat = b.vector("ctr/flat", &[-1i64])?;
    let w = b.op("Reshape", "ctr/w", &[&w, &flat])?;
    let xw = b.op("Mul", "ctr/xw", &[&x, &w])?;
    let linear = b.segment_sum("ctr/linear", &xw, &owner, &instances)?;

    let mut fm_sum = None;
    let mut ffm_parts = None;
    let logit = match m.kind {
        CtrKind::Lr | CtrKind::Fm => {
            let mut logit = b.op("AddV2", "ctr/logit_linear", &[&linear, &bias])?;
            if width > 1 {
                let begin = b.vector("ctr/v_begin", &[0i64, 1])?;
                let size = b.vector("ctr/v_size", &[-1i64, -1])?;
                let v = b.op("Slice", "ctr/v", &[&vals, &begin, &size])?;
                let axis = b.scalar("ctr/x_axis", 1i32)?;
                let xc = b.op("ExpandDims", "ctr/x_column", &[&x, &axis])?;
                let xv = b.op("Mul", "ctr/xv", &[&v, &xc])?;
                let xv2 = b.op("Mul", "ctr/xv_squared", &[&xv, &xv])?;
                let sum = b.segment_sum("ctr/sum", &xv, &owner, &instances)?;
                let sumsq = b.segment_sum("ctr/sumsq", &xv2, &owner, &instances)?;
                let sum2 = b.op("Mul", "ctr/sum_squared", &[&sum, &sum])?;
                let diff = b.op("Sub", "ctr/pair_terms", &[&sum2, &sumsq])?;
                let pairs = b.op("Sum", "ctr/pairs", &[&diff, &axis])?;
                let half = b.scalar("ctr/half", 0.5f32)?;
                let pairs = b.op("Mul", "ctr/half_pairs", &[&pairs, &half])?;
                logit = b.op("AddV2", "ctr/logit", &[&logit, &pairs])?;
                fm_sum = Some(sum);
            }
            logit
        }
        CtrKind::Ffm => {
            let numbers = b.concat("features/fields", &f.numbers, 0)?;
            let positions = b.concat("features/positions", &f.positions, 0)?;
            let k = dims[0];
            let (logit, parts) = ffm_logit(
                b,
                &FfmInputs {
                    vals: &vals,
                    x: &x,
                    numbers: &numbers,
                    positions: &positions,
                    owner: &owner,
                    instances: &instances,
                    linear: &linear,
                    bias: &bias,
                    blocks,
                    k,
                    normalize: cfg.normalize.unwrap_or(true),
                },
            )?;
            ffm_parts = Some(parts);
            logit
        }
    };
    Ok(Forward {
        instances,
        owner,
        x,
        rows,
        table_ids,
        vals,
        logit,
        sum: fm_sum,
        ffm: ffm_parts,
        dims,
        width,
    })
}

/// Each instance's number of values of a ragged slot: `row_splits[1:] - row_splits[:-1]`.
fn lengths(b: &mut Builder, p: &str, r: &Ragged) -> Result<Output> {
    let ends = b.slice(&format!("{p}/ends"), &r.splits, 1, None)?;
    let starts = b.slice(&format!("{p}/starts"), &r.splits, 0, Some(-1))?;
    b.op("Sub", &format!("{p}/lengths"), &[&ends, &starts])
}

struct FfmInputs<'a> {
    vals: &'a Output,
    x: &'a Output,
    numbers: &'a Output,
    positions: &'a Output,
    owner: &'a Output,
    instances: &'a Output,
    linear: &'a Output,
    bias: &'a Output,
    blocks: usize,
    k: usize,
    normalize: bool,
}

/// The field-aware logit: the instances' features laid out densely (`[B, F, ...]`, padded
/// features of value 0), each pair's `<v_{i,f_j}, v_{j,f_i}>` gathered from both sides, summed
/// over `i < j`.
fn ffm_logit(b: &mut Builder, i: &FfmInputs<'_>) -> Result<(Output, FfmParts)> {
    let (blocks, k) = (i.blocks as i64, i.k as i64);
    // Where each feature goes: [instance, position].
    let axis1 = b.scalar("ffm/axis1", 1i32)?;
    let inst = b.op("ExpandDims", "ffm/instance_column", &[i.owner, &axis1])?;
    let pos = b.op("ExpandDims", "ffm/position_column", &[i.positions, &axis1])?;
    let at = b.concat("ffm/at", &[inst, pos], 1)?;
    let zero = b.vector("ffm/zero", &[0i64])?;
    let one = b.scalar("ffm/one", 1i64)?;
    let plus1 = b.op("AddV2", "ffm/position_plus1", &[i.positions, &one])?;
    let all = b.concat("ffm/widths", &[plus1, zero], 0)?;
    let axis0 = b.scalar("ffm/axis0", 0i32)?;
    let width = b.op("Max", "ffm/width", &[&all, &axis0])?;
    let shape1 = b.vector("ffm/one_dim", &[1i64])?;
    let n = b.op("Reshape", "ffm/instances_dim", &[i.instances, &shape1])?;
    let fw = b.op("Reshape", "ffm/width_dim", &[&width, &shape1])?;
    let dense2 = b.concat("ffm/shape2", &[n.clone(), fw.clone()], 0)?;
    let tail = b.vector("ffm/factor_dims", &[blocks, k])?;
    let dense4 = b.concat("ffm/shape4", &[n, fw, tail], 0)?;
    // The factors of each feature, [F, blocks, k], laid out as [B, W, blocks, k].
    let begin = b.vector("ffm/v_begin", &[0i64, 1])?;
    let size = b.vector("ffm/v_size", &[-1i64, -1])?;
    let v = b.op("Slice", "ffm/v", &[i.vals, &begin, &size])?;
    let vshape = b.vector("ffm/v_shape", &[-1i64, blocks, k])?;
    let v = b.op("Reshape", "ffm/v_blocks", &[&v, &vshape])?;
    let vd = b.op("ScatterNd", "ffm/v_dense", &[&at, &v, &dense4])?;
    let fd = b.op("ScatterNd", "ffm/fields_dense", &[&at, i.numbers, &dense2])?;
    let xd = b.op("ScatterNd", "ffm/x_dense", &[&at, i.x, &dense2])?;
    // g[b, i, j] = v[b, i, field of j]: [B, W, W, k].
    let fd_row = b.op("ExpandDims", "ffm/fields_row", &[&fd, &axis1])?;
    let ones = b.vector("ffm/tile", &[1i64])?;
    let fw2 = fw_of(b, &width)?;
    let multiples = b.concat("ffm/tiles", &[ones.clone(), fw2, ones], 0)?;
    let idx = b.op("Tile", "ffm/pair_fields", &[&fd_row, &multiples])?;
    let axis2 = b.scalar("ffm/axis2", 2i64)?;
    let g: Output = b
        .node("GatherV2", "ffm/pair_factors", &[&vd, &idx, &axis2], |nd| {
            nd.set_attr_int("batch_dims", 2)
        })?
        .into();
    let perm = b.vector("ffm/swap", &[0i32, 2, 1, 3])?;
    let gt = b.op("Transpose", "ffm/pair_factors_mirrored", &[&g, &perm])?;
    let prod = b.op("Mul", "ffm/pair_products", &[&g, &gt])?;
    let axis3 = b.scalar("ffm/axis3", 3i32)?;
    let dots = b.op("Sum", "ffm/pair_dots", &[&prod, &axis3])?;
    let axis2i = b.scalar("ffm/axis_i", 2i32)?;
    let xi = b.op("ExpandDims", "ffm/x_i", &[&xd, &axis2i])?;
    let xj = b.op("ExpandDims", "ffm/x_j", &[&xd, &axis1])?;
    let xx = b.op("Mul", "ffm/x_pairs", &[&xi, &xj])?;
    // i < j.
    let z0 = b.scalar("ffm/range_start", 0i64)?;
    let d1 = b.scalar("ffm/range_step", 1i64)?;
    let r = b.op("Range", "ffm/range", &[&z0, &width, &d1])?;
    let axis0i = b.scalar("ffm/axis_rj", 0i32)?;
    let ri = b.op("ExpandDims", "ffm/range_i", &[&r, &axis1])?;
    let rj = b.op("ExpandDims", "ffm/range_j", &[&r, &axis0i])?;
    let upper = b.op("Less", "ffm/upper", &[&ri, &rj])?;
    let upper = b.op_typed("Cast", "ffm/upper_f", &[&upper], "DstT", DataType::Float)?;
    let terms = b.op("Mul", "ffm/pair_terms_x", &[&dots, &xx])?;
    let terms = b.op("Mul", "ffm/pair_terms", &[&terms, &upper])?;
    let axes = b.vector("ffm/pair_axes", &[1i32, 2])?;
    let pairs = b.op("Sum", "ffm/pairs", &[&terms, &axes])?;

    let (sqrt_n, n) = if i.normalize {
        let x2 = b.op("Mul", "ffm/x_squared", &[i.x, i.x])?;
        let squares = b.segment_sum("ffm/squares", &x2, i.owner, i.instances)?;
        let zero_f = b.scalar("ffm/zero_f", 0f32)?;
        let one_f = b.op("OnesLike", "ffm/ones_f", &[&squares])?;
        let pos = b.op("Greater", "ffm/has_squares", &[&squares, &zero_f])?;
        let inv = b.op("DivNoNan", "ffm/inverse", &[&one_f, &squares])?;
        let n = b.op("SelectV2", "ffm/norm", &[&pos, &inv, &one_f])?;
        (Some(b.op("Sqrt", "ffm/sqrt_norm", &[&n])?), Some(n))
    } else {
        (None, None)
    };
    let linear = match &sqrt_n {
        Some(s) => b.op("Mul", "ffm/linear_normed", &[i.linear, s])?,
        None => i.linear.clone(),
    };
    let pairs = match &n {
        Some(n) => b.op("Mul", "ffm/pairs_normed", &[&pairs, n])?,
        None => pairs,
    };
    let logit = b.op("AddV2", "ffm/logit_linear", &[&linear, i.bias])?;
    let logit = b.op("AddV2", "ffm/logit", &[&logit, &pairs])?;
    Ok((
        logit,
        FfmParts {
            at,
            dense2,
            fields: fd,
            x: xd,
            mirrored: gt,
            range_i: ri,
            range_j: rj,
            norm: n,
            sqrt_norm: sqrt_n,
            blocks: i.blocks,
            k: i.k,
        },
    ))
}

/// What the field-aware machine's gradients read of its forward pass: the dense layout
/// (`at`: each feature's `[instance, position]`; `dense2`: `[B, W]`), its features' fields and
/// values there, each pair's factors seen from the other side (`[B, W, W, k]`), the positions' ranges
/// (`[W, 1]`, `[1, W]`) and the instances' norms.
pub(crate) struct FfmParts {
    pub(crate) at: Output,
    pub(crate) dense2: Output,
    pub(crate) fields: Output,
    pub(crate) x: Output,
    pub(crate) mirrored: Output,
    pub(crate) range_i: Output,
    pub(crate) range_j: Output,
    pub(crate) norm: Option<Output>,
    pub(crate) sqrt_norm: Option<Output>,
    pub(crate) blocks: usize,
    pub(crate) k: usize,
}

fn fw_of(b: &mut Builder, width: &Output) -> Result<Output> {
    let shape1 = b.vector("ffm/one_dim_w", &[1i64])?;
    b.op("Reshape", "ffm/width_vector", &[width, &shape1])
}
