//! What `audit()` reports.

use std::fmt;

/// Where every object of a quiescent pool is, as found by
/// [`GenericPool::audit`](crate::GenericPool::audit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditReport {
    /// Objects in the pool.
    pub capacity: usize,
    /// Free objects in the common ring.
    pub in_ring: usize,
    /// Free objects in caches.
    pub in_caches: usize,
    /// Objects held by handles (`capacity - in_ring - in_caches`).
    pub in_use: usize,
    /// `(label, objects)` per live cache.
    pub caches: Vec<(String, usize)>,
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "capacity={} in_ring={} in_caches={} in_use={} caches={}",
            self.capacity,
            self.in_ring,
            self.in_caches,
            self.in_use,
            self.caches.len()
        )
    }
}
