//! What the conformance suites share: the dense dimension and the time of their points, owners
//! and ids unique to a run, hand-made vectors and a seeded generator whose failures replay.

use thinkus_common::model::Owner;

use crate::vector::memory_id;

/// Dense dimension used by the suite: small enough for hand-made vectors.
pub const DIM: usize = 8;

/// A millisecond timestamp in 2023, the default time of the suite's points.
pub const T0: i64 = 1_700_000_000_000;

/// An owner unique to this run: a user of the suite's tenant.
pub fn unique_user(label: &str) -> Owner {
    Owner::new("conformance", format!("conf-{label}-{}", uuid::Uuid::new_v4().simple()))
}

/// A fresh memory id.
pub fn new_id() -> String {
    memory_id(&uuid::Uuid::now_v7())
}

/// A small deterministic generator (SplitMix64), so failures replay from their seed.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in [-1, 1).
    pub fn signed_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A random subset (possibly empty) of `items`.
    pub fn subset<T: Clone>(&mut self, items: &[T]) -> Vec<T> {
        items.iter().filter(|_| self.chance(50)).cloned().collect()
    }

    /// A random direction of `dim` dimensions, normalised.
    pub fn unit_vector(&mut self, dim: usize) -> Vec<f32> {
        loop {
            let v: Vec<f32> = (0..dim).map(|_| self.signed_unit()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 1e-3 {
                return v.into_iter().map(|x| x / norm).collect();
            }
        }
    }
}

/// The unit vector along axis `i` of [`DIM`].
pub fn axis(i: usize) -> Vec<f32> {
    let mut v = vec![0.0; DIM];
    v[i % DIM] = 1.0;
    v
}
