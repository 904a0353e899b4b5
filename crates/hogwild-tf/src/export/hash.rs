//! The native models' id hashes as stock TensorFlow ops on uint64 tensors (`Mul`, `AddV2`,
//! `BitwiseXor`, `RightShift`, `FloorMod`, `FloorDiv`: all have uint64 CPU kernels, and wrap as
//! Rust's `wrapping_*` do), so that a SavedModel hashes ids exactly as `hogwild predict` does
//! without any op library.

use tensorflow::{DataType, Output};

use super::graph::Builder;
use crate::Result;

/// splitmix64's increment (`hogwild::rng::mix64`).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// FNV-1a's 64-bit offset basis and prime (`hogwild::rng::fnv1a64`).
const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01B3;

/// An int64 tensor's bits as uint64.
pub(crate) fn to_u64(b: &mut Builder, name: &str, x: &Output) -> Result<Output> {
    b.op_typed("Bitcast", name, &[x], "type", DataType::UInt64)
}

/// A uint64 tensor's bits as int64.
pub(crate) fn to_i64(b: &mut Builder, name: &str, x: &Output) -> Result<Output> {
    b.op_typed("Bitcast", name, &[x], "type", DataType::Int64)
}

fn binary_c(b: &mut Builder, op: &str, name: &str, x: &Output, c: u64) -> Result<Output> {
    let c = b.scalar(&format!("{name}/c"), c)?;
    b.op(op, name, &[x, &c])
}

/// `x ^ (x >> shift)`.
fn xorshift(b: &mut Builder, name: &str, x: &Output, shift: u64) -> Result<Output> {
    let s = binary_c(b, "RightShift", &format!("{name}/shift"), x, shift)?;
    b.op("BitwiseXor", name, &[x, &s])
}

/// `hogwild::rng::mix64` (splitmix64's finalizer) of each element.
pub(crate) fn mix64(b: &mut Builder, name: &str, x: &Output) -> Result<Output> {
    let x = binary_c(b, "AddV2", &format!("{name}/gamma"), x, GOLDEN_GAMMA)?;
    let x = xorshift(b, &format!("{name}/xs30"), &x, 30)?;
    let x = binary_c(b, "Mul", &format!("{name}/m1"), &x, 0xBF58_476D_1CE4_E5B9)?;
    let x = xorshift(b, &format!("{name}/xs27"), &x, 27)?;
    let x = binary_c(b, "Mul", &format!("{name}/m2"), &x, 0x94D0_49BB_1331_11EB)?;
    xorshift(b, name, &x, 31)
}

/// The high 64 bits of the 128-bit product `x * n` (the CTR models' `(h * buckets) >> 64`,
/// a hash's bucket without a division): from the 32-bit halves, whose products fit in 64 bits.
pub(crate) fn mul_high(b: &mut Builder, name: &str, x: &Output, n: u64) -> Result<Output> {
    let (n_hi, n_lo) = (n >> 32, n & 0xFFFF_FFFF);
    let x_hi = binary_c(b, "RightShift", &format!("{name}/x_hi"), x, 32)?;
    let x_lo = binary_c(b, "BitwiseAnd", &format!("{name}/x_lo"), x, 0xFFFF_FFFF)?;
    let lo_lo = binary_c(b, "Mul", &format!("{name}/lo_lo"), &x_lo, n_lo)?;
    let lo_hi = binary_c(b, "Mul", &format!("{name}/lo_hi"), &x_lo, n_hi)?;
    let hi_lo = binary_c(b, "Mul", &format!("{name}/hi_lo"), &x_hi, n_lo)?;
    let hi_hi = binary_c(b, "Mul", &format!("{name}/hi_hi"), &x_hi, n_hi)?;
    // The middle column: the carry out of the low 64 bits.
    let carry = binary_c(b, "RightShift", &format!("{name}/carry0"), &lo_lo, 32)?;
    let a = binary_c(
        b,
        "BitwiseAnd",
        &format!("{name}/lo_hi_low"),
        &lo_hi,
        0xFFFF_FFFF,
    )?;
    let c = binary_c(
        b,
        "BitwiseAnd",
        &format!("{name}/hi_lo_low"),
        &hi_lo,
        0xFFFF_FFFF,
    )?;
    let mid = b.op("AddV2", &format!("{name}/mid_a"), &[&carry, &a])?;
    let mid = b.op("AddV2", &format!("{name}/mid_b"), &[&mid, &c])?;
    let mid_hi = binary_c(b, "RightShift", &format!("{name}/mid_hi"), &mid, 32)?;
    let lo_hi_hi = binary_c(b, "RightShift", &format!("{name}/lo_hi_high"), &lo_hi, 32)?;
    let hi_lo_hi = binary_c(b, "RightShift", &format!("{name}/hi_lo_high"), &hi_lo, 32)?;
    let s = b.op("AddV2", &format!("{name}/s1"), &[&hi_hi, &lo_hi_hi])?;
    let s = b.op("AddV2", &format!("{name}/s2"), &[&s, &hi_lo_hi])?;
    b.op("AddV2", name, &[&s, &mid_hi])
}

/// The CTR models' row of each id (uint64) with a field's `salt`: `mul_high(mix64(id ^ salt),
/// buckets)`.
pub(crate) fn row_of_salt(
    b: &mut Builder,
    name: &str,
    ids: &Output,
    salt: &Output,
    buckets: u64,
) -> Result<Output> {
    let x = b.op("BitwiseXor", &format!("{name}/salted"), &[ids, salt])?;
    let h = mix64(b, &format!("{name}/mix"), &x)?;
    mul_high(b, name, &h, buckets)
}

/// The salt of each field number (uint64): `mix64(fnv1a64(decimal digits))`, the native
/// `number_salt`. FNV-1a runs over the digits from the most significant, one unrolled step per
/// decimal place of a u64 (20), each step kept only where the number has that digit.
pub(crate) fn number_salt(b: &mut Builder, name: &str, n: &Output) -> Result<Output> {
    let zeros = b.op("ZerosLike", &format!("{name}/zeros"), &[n])?;
    let mut h = binary_c(b, "AddV2", &format!("{name}/offset"), &zeros, FNV_OFFSET)?;
    for place in (0..20u32).rev() {
        let p = &format!("{name}/d{place}");
        let pow = 10u64.pow(place);
        let q = binary_c(b, "FloorDiv", &format!("{p}/q"), n, pow)?;
        let digit = binary_c(b, "FloorMod", &format!("{p}/digit"), &q, 10)?;
        let byte = binary_c(b, "AddV2", &format!("{p}/byte"), &digit, u64::from(b'0'))?;
        let x = b.op("BitwiseXor", &format!("{p}/xor"), &[&h, &byte])?;
        let stepped = binary_c(b, "Mul", &format!("{p}/step"), &x, FNV_PRIME)?;
        h = if place == 0 {
            stepped
        } else {
            // A digit exists where n >= 10^place (the units digit always).
            let has = binary_c(b, "GreaterEqual", &format!("{p}/has"), n, pow)?;
            b.op("SelectV2", &format!("{p}/h"), &[&has, &stepped, &h])?
        };
    }
    mix64(b, name, &h)
}

#[cfg(test)]
mod tests {
    use hogwild::rng::fnv1a64;
    use tensorflow::{Session, SessionOptions, SessionRunArgs, Tensor};

    use super::*;

    /// Runs `f` on `xs` (a uint64 placeholder) in a session; the uint64 results.
    fn run(xs: &[u64], f: impl FnOnce(&mut Builder, &Output) -> Result<Output>) -> Vec<u64> {
        let mut b = Builder::new();
        let x = b.placeholder("x", DataType::UInt64, &[-1]).unwrap();
        let y = f(&mut b, &x).unwrap();
        let session = Session::new(&SessionOptions::new(), &b.graph).unwrap();
        let input = Tensor::new(&[xs.len() as u64]).with_values(xs).unwrap();
        let mut args = SessionRunArgs::new();
        args.add_feed(&x.operation, 0, &input);
        let token = args.request_fetch(&y.operation, y.index);
        session.run(&mut args).unwrap();
        args.fetch::<u64>(token).unwrap().to_vec()
    }

    /// Edge values: zero, the largest, powers of ten around the 20-digit ones, and others.
    const EDGES: [u64; 10] = [
        0,
        1,
        9,
        10,
        999_999,
        10_000_000_000_000_000_000,
        9_999_999_999_999_999_999,
        u64::MAX,
        u64::MAX - 1,
        0x9E37_79B9_7F4A_7C15,
    ];

    #[test]
    fn the_graph_hashes_as_the_native_models() {
        assert_eq!(
            run(&EDGES, |b, x| super::mix64(b, "mix", x)),
            EDGES.map(hogwild::rng::mix64).to_vec()
        );
        for n in [1u64, 3, 65_536, 1 << 32, u64::MAX, 2_000_000_011] {
            let want: Vec<u64> = EDGES
                .iter()
                .map(|&x| ((u128::from(x) * u128::from(n)) >> 64) as u64)
                .collect();
            assert_eq!(run(&EDGES, |b, x| mul_high(b, "hi", x, n)), want, "n = {n}");
        }
        let want: Vec<u64> = EDGES
            .iter()
            .map(|n| hogwild::rng::mix64(fnv1a64(n.to_string().as_bytes())))
            .collect();
        assert_eq!(run(&EDGES, |b, x| number_salt(b, "salt", x)), want);
    }
}
