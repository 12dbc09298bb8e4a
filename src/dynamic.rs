//! Run-time pools shared by reference counting: [`DynPool<T>`], a [`Runtime`] pool in an
//! `Arc` (issue 11, reworked by issue 23).
//!
//! A run-time pool ([`PoolBuilder::build_runtime`], identity [`Runtime`]) needs no brand:
//! any number live at once, created from configuration, stored in structs. Its handles are the
//! 4-byte cache entries themselves ([`DynHandle<T>`] is [`GenericHandle<T, Runtime,
//! Offset>`](GenericHandle)), and every use of a handle is checked with **one range compare**
//! against the pool's range of the process's handle space (`space.rs`; DESIGN.md, "Handle
//! soundness"). A handle of another pool, or of a dropped pool, panics naming both pools (or is
//! a typed [`PoolError::ForeignHandle`] from the `try_` forms); it never reaches an object.
//!
//! `DynPool<T>` is that pool behind an `Arc`: clones are the same pool, and it dereferences to
//! the pool ([`GenericPool`]), so every pool method (`get`, `put`, `get_bulk`, `get_mut`,
//! `resolver`, `try_get_mut`, `stats`, ...) is the pool's own. What it adds are the companions
//! that hold a clone of the `Arc` and so are `'static` (they move into `std::thread::spawn`):
//! [`DynPool::local_cache`] and [`DynPool::handle_ring`].
//!
//! ```
//! use idxpool::{DynPool, DynHandle, PoolBuilder};
//!
//! struct BufferManager {
//!     pool: DynPool<[u8; 2048]>,
//! }
//! impl BufferManager {
//!     fn new(buffers: u32) -> Result<Self, idxpool::PoolError> {
//!         Ok(BufferManager { pool: DynPool::new(PoolBuilder::zeroed(buffers).cache_size(32))? })
//!     }
//!     fn fill(&self, byte: u8) -> Result<DynHandle<[u8; 2048]>, idxpool::PoolError> {
//!         let mut h = self.pool.get()?;
//!         self.pool.get_mut(&mut h).fill(byte);
//!         Ok(h)
//!     }
//! }
//! // Two instances at once (a named brand would refuse the second):
//! let a = BufferManager::new(64)?;
//! let b = BufferManager::new(64)?;
//! let ha = a.fill(1)?;
//! assert_eq!(std::mem::size_of_val(&ha), 4);
//! assert_eq!(a.pool.get_ref(&ha)[0], 1);
//! assert!(b.pool.try_get_ref(&ha).is_err()); // a's handle is rejected by b
//! a.pool.put(ha);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! Cost against a branded pool: the range compare on each access and put (a compare and a
//! branch that is never taken; bulk puts check the whole burst first, branch-free); the bulk
//! paths copy entries straight between the caller's `Vec` and the cache, as the branded pool's
//! do (BENCHMARKS.md, "Run-time pools").

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::audit::AuditReport;
use crate::brand::Runtime;
use crate::builder::PoolBuilder;
use crate::error::PoolError;
use crate::handle::GenericHandle;
use crate::handle_ring::Zeroing;
use crate::owned::{OwnedConsumer, OwnedLocalCache, OwnedProducer};
use crate::pool::GenericPool;
use crate::repr::Offset;

/// The run-time pool inside a [`DynPool`].
pub type RuntimePool<T> = GenericPool<T, Runtime, Offset>;

/// Ownership of one object of a run-time pool: the 4-byte entry (`Option<DynHandle<T>>` is 4
/// bytes too). Like [`crate::Handle`], it is neither `Clone` nor `Copy`, and dropping it
/// instead of putting it back leaks its object (reported when the pool is dropped).
pub type DynHandle<T> = GenericHandle<T, Runtime, Offset>;

/// An explicit cache of a [`DynPool`] that holds a clone of the pool: `'static`, `Send`, not
/// `Sync` ([`OwnedLocalCache`]; made by [`DynPool::local_cache`]).
pub type DynLocalCache<T> = OwnedLocalCache<T, Runtime, Offset>;

/// Producer half of a [`DynPool::handle_ring`] ([`OwnedProducer`]).
pub type DynProducer<T> = OwnedProducer<T, Runtime, Offset>;

/// Consumer half of a [`DynPool::handle_ring`] ([`OwnedConsumer`]).
pub type DynConsumer<T> = OwnedConsumer<T, Runtime, Offset>;

/// A guard that puts its object back when dropped ([`crate::Pooled`] of a run-time pool;
/// `pool.get_pooled()`).
pub type DynPooled<'p, T> = crate::Pooled<'p, T, Runtime, Offset>;

/// A run-time pool ([`Runtime`] identity, 4-byte handles) behind an `Arc`: clones are the same
/// pool, and it dereferences to it ([`GenericPool`]), so the pool's whole API is here. The
/// objects are dropped when the last clone, and the last companion holding one, goes.
///
/// ```
/// use idxpool::{DynPool, PoolBuilder, handle_ring::Zeroing};
///
/// let pool = DynPool::new(PoolBuilder::<[u8; 64]>::zeroed(1024).cache_size(32).name("rx"))?;
/// let (mut tx, mut rx) = pool.handle_ring(256, Zeroing::Batched)?;
/// let mut cache = pool.local_cache();
/// let producer = std::thread::spawn(move || {
///     for i in 0..100u8 {
///         let mut h = cache.get().unwrap();
///         cache.get_mut(&mut h)[0] = i;
///         let mut h = Some(h);
///         while let Some(x) = h.take() {
///             if let Err(back) = tx.produce(x) { h = Some(back); std::thread::yield_now(); }
///         }
///     }
/// });
/// let mut seen = 0u8;
/// while seen < 100 {
///     if let Some(h) = rx.consume() {
///         assert_eq!(pool.get_ref(&h)[0], seen);
///         pool.put(h);
///         seen += 1;
///     }
/// }
/// producer.join().unwrap();
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct DynPool<T>(Arc<RuntimePool<T>>);

impl<T> Clone for DynPool<T> {
    fn clone(&self) -> Self {
        DynPool(self.0.clone())
    }
}

impl<T> Deref for DynPool<T> {
    type Target = RuntimePool<T>;

    #[inline(always)]
    fn deref(&self) -> &RuntimePool<T> {
        &self.0
    }
}

impl<T> DynPool<T> {
    /// Creates the pool described by `builder` ([`PoolBuilder::build_runtime`]).
    ///
    /// # Errors
    /// As [`PoolBuilder::build_runtime`].
    pub fn new(builder: PoolBuilder<'_, T>) -> Result<Self, PoolError> {
        Ok(DynPool(Arc::new(builder.build_runtime()?)))
    }

    /// True when `self` and `other` are clones of one pool.
    pub fn same_pool(&self, other: &DynPool<T>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The `Arc` inside (for the owned companions of [`GenericPool`]).
    pub fn as_arc(&self) -> &Arc<RuntimePool<T>> {
        &self.0
    }

    /// Checks every conservation invariant ([`GenericPool::audit`]). Needs the only
    /// reference to the pool (no clone, no companion alive), which proves quiescence.
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] when other references exist; else as
    /// [`GenericPool::audit`].
    pub fn audit(&mut self) -> Result<AuditReport, PoolError> {
        match Arc::get_mut(&mut self.0) {
            Some(p) => p.audit(),
            None => Err(PoolError::AuditFailed(
                "audit needs the only reference to the pool (drop clones and companions first)"
                    .into(),
            )),
        }
    }
}

/// Companions that hold a clone of the pool (hence `T: 'static`).
impl<T: 'static> DynPool<T> {
    /// An explicit cache holding a clone of the pool: `'static`, `Send` (move it into a
    /// spawned thread), not `Sync`. See [`OwnedLocalCache`].
    pub fn local_cache(&self) -> DynLocalCache<T> {
        self.0.local_cache_owned()
    }

    /// A ring of `size` slots moving this pool's handles from one thread to another
    /// ([`crate::HandleRing`]: 4-byte slots, ptr_ring batching). Both halves hold a clone of the
    /// pool, so they are `'static` and move into `std::thread::spawn`; handles left in the
    /// ring return to the pool when both halves are dropped.
    ///
    /// # Errors
    /// As [`crate::handle_ring::GenericHandleRing::new`] (`size` 0, `BatchOf(0)`, allocation).
    pub fn handle_ring(
        &self,
        size: usize,
        zeroing: Zeroing,
    ) -> Result<(DynProducer<T>, DynConsumer<T>), PoolError> {
        crate::handle_ring::GenericHandleRing::new_owned(&self.0, size, zeroing)
    }
}

impl<T> fmt::Debug for DynPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DynPool").field(&*self.0).finish()
    }
}
