//! Pool creation: configuration, object initialisation (DPDK's `obj_init`), brand claim.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::brand::{Brand, BrandSlot, NamedBrand, Runtime, Scoped, Unchecked};
use crate::cache::{FlushPolicy, CACHE_LINE, CACHE_MAX_SIZE};
use crate::element::Element;
use crate::error::PoolError;
use crate::pool::debug::ObjectStates;
use crate::pool::{Growth, InitFn, Pool, PoolCore};
use crate::region::{BackingPolicy, Region};
use crate::repr::{Geometry, Repr};
use crate::ring::RingFlags;

/// How far apart objects are placed.
///
/// ```
/// use idxpool::{PoolBuilder, StrideMode};
/// assert_eq!(StrideMode::Auto.stride_for(2048, 8)?, 2112); // 33 lines: an odd count
/// assert_eq!(StrideMode::Natural.stride_for(24, 8)?, 24);
/// assert!(StrideMode::Bytes(20).stride_for(24, 8).is_err()); // smaller than the object
/// let pool = PoolBuilder::<[u64; 3]>::with_default(8).stride(StrideMode::CacheLine).build()?;
/// assert_eq!(pool.stride(), 64);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StrideMode {
    /// `size_of::<T>()` rounded up to the next power of two below a cache line (no object straddles
    /// two lines), else to an **odd** number of cache lines: with an even count (2 KiB objects at a
    /// 2 KiB stride) the first line of every object maps to the same few L1/L2 sets and every touch
    /// misses. As DPDK's `optimize_object_size` spreads objects over memory channels (its 64-byte
    /// header makes a 2 KiB mbuf's stride 2112). Costs at most one line per object. Types aligned
    /// to more than a line are not padded (it would misalign them): their stride is their size.
    #[default]
    Auto,
    /// `size_of::<T>()` (already a multiple of `align_of::<T>()`): densest.
    Natural,
    /// `size_of::<T>()` rounded up to a multiple of 64 bytes.
    CacheLine,
    /// An explicit stride in bytes: at least `size_of::<T>()` and a multiple of `align_of::<T>()`.
    Bytes(usize),
}

impl StrideMode {
    /// The stride for `T` under this mode.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a `Bytes` stride that is too small or misaligned;
    /// [`PoolError::SizeOverflow`] when rounding overflows.
    pub fn stride_for(self, size: usize, align: usize) -> Result<usize, PoolError> {
        let round = |to: usize| {
            size.checked_next_multiple_of(to)
                .ok_or_else(|| PoolError::overflow(format!("object size {size} rounded to {to}")))
        };
        match self {
            StrideMode::Natural => Ok(size),
            StrideMode::CacheLine => round(CACHE_LINE),
            StrideMode::Auto if size < CACHE_LINE => Ok(size.next_power_of_two()),
            StrideMode::Auto => {
                let s = round(CACHE_LINE)?;
                // One line of padding keeps objects aligned only if their alignment is at most a
                // line (tests/bad_input.rs).
                if align <= CACHE_LINE && (s / CACHE_LINE).is_multiple_of(2) {
                    s.checked_add(CACHE_LINE)
                        .ok_or_else(|| PoolError::overflow("stride padding"))
                } else {
                    Ok(s)
                }
            }
            StrideMode::Bytes(b) => {
                if b < size || b % align != 0 {
                    Err(PoolError::config(format!(
                        "stride {b} must be >= object size {size} and a multiple of its alignment {align}"
                    )))
                } else {
                    Ok(b)
                }
            }
        }
    }
}

/// The memory of one object while the pool is being built: uninitialised until [`InitSlot::write`]
/// (or the `unsafe` [`InitSlot::assume_init`]) turns it into the [`Written`] proof that
/// [`PoolBuilder::with_init`]'s initialiser must return.
///
/// `'s` is a fresh, invariant lifetime per object (the initialiser is higher-ranked over it), so a
/// `Written<'s>` proves that *this* object was written: it cannot be made up, kept from an earlier
/// object or passed for another one (tests/ui/init_*.rs).
///
/// ```
/// use idxpool::PoolBuilder;
/// struct Big { id: u32, buf: [u8; 4096] }
/// let mut pool = PoolBuilder::with_init(4, |i, slot| {
///     slot.write(Big { id: i, buf: [0; 4096] }) // written in place, once per object
/// })
/// .build()?;
/// assert!(pool.obj_iter().all(|(i, b)| b.id == i && b.buf[0] == 0));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct InitSlot<'s, T> {
    slot: &'s mut MaybeUninit<T>,
    /// Set by [`InitSlot::write`]: the builder's unwind guard then drops this object too.
    written: &'s AtomicBool,
    _invariant: PhantomData<fn(&'s ()) -> &'s ()>,
}

/// Proof that the object of one [`InitSlot`] was initialised; made only by
/// [`InitSlot::write`] and [`InitSlot::assume_init`]. Invariant in `'s`.
///
/// ```
/// use idxpool::{InitSlot, PoolBuilder, Written};
/// // The proof ties the initialiser's result to the slot it was given.
/// fn init<'s>(i: u32, slot: InitSlot<'s, u64>) -> Written<'s> {
///     slot.write(u64::from(i) * 10)
/// }
/// let mut pool = PoolBuilder::with_init(4, init).build()?;
/// assert_eq!(pool.obj_iter().map(|(_, v)| *v).sum::<u64>(), 60);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[must_use = "return the proof from the initialiser"]
pub struct Written<'s>(PhantomData<fn(&'s ()) -> &'s ()>);

impl<'s, T> InitSlot<'s, T> {
    /// Moves `value` into the object and returns the proof that it is initialised.
    #[inline]
    pub fn write(self, value: T) -> Written<'s> {
        self.slot.write(value);
        self.written.store(true, Ordering::Relaxed);
        Written(PhantomData)
    }

    /// The object's uninitialised memory, to initialise a large object in place field by field.
    /// Aligned and valid for writes of `size_of::<T>()` bytes until the initialiser returns.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.slot.as_mut_ptr()
    }

    /// The object's memory as a `MaybeUninit<T>` (e.g. for zeroing or a byte copy), to be followed
    /// by [`InitSlot::assume_init`].
    #[inline]
    pub fn as_uninit(&mut self) -> &mut MaybeUninit<T> {
        self.slot
    }

    /// Declares the object initialised after writing it through [`InitSlot::as_mut_ptr`] or
    /// [`InitSlot::as_uninit`].
    ///
    /// # Safety
    /// The object must hold a valid `T` (as for [`MaybeUninit::assume_init`]): the pool hands it
    /// out as `&T` / `&mut T` and drops it.
    #[inline]
    pub unsafe fn assume_init(self) -> Written<'s> {
        Written(PhantomData)
    }
}

pub(crate) enum Init<'a> {
    /// Fresh anonymous memory is already zero: no pass over the region.
    Zeroed,
    /// One call per object, in index order.
    Each(InitFn<'a>),
    /// As `Each`, with the initialiser moved to `PoolBuilder::grow_init` (kept for `grow`).
    Kept,
}

/// `slot.write(make(i))`, out of line: the temporary `T` lives in this frame only, not in every
/// builder's frame.
#[inline(never)]
fn write_by_value<T>(slot: &mut MaybeUninit<T>, make: &mut impl FnMut(u32) -> T, i: u32) {
    slot.write(make(i));
}

/// The largest cache size whose flush threshold under `policy` is at most `objects` (the inverse of
/// [`FlushPolicy::fill_limit`]), capped at [`CACHE_MAX_SIZE`].
fn max_cache_size(policy: FlushPolicy, objects: u32) -> u32 {
    let cap = objects as u64;
    let max = match policy {
        // floor(3n / 2) <= cap  <=>  n <= floor((2 cap + 1) / 3)
        FlushPolicy::Classic => (2 * cap + 1) / 3,
        FlushPolicy::Dpdk2607 => cap,
        // 2n <= cap
        FlushPolicy::SizeAligned => cap / 2,
    };
    max.min(CACHE_MAX_SIZE as u64) as u32
}

/// The default cache size for `capacity` under `policy`: the largest (at most
/// [`DEFAULT_CACHE_SIZE`]) whose flush threshold is at most `capacity / DEFAULT_CACHE_SHARE` (see
/// there).
fn default_cache_size(policy: FlushPolicy, capacity: u32) -> u32 {
    DEFAULT_CACHE_SIZE.min(max_cache_size(policy, capacity / DEFAULT_CACHE_SHARE))
}

/// Configures and creates a pool, as `rte_mempool_create(name, n, elt_size, cache_size, ...,
/// obj_init, obj_init_arg, socket_id, flags)`.
///
/// ```
/// use idxpool::{PoolBuilder, FlushPolicy};
/// idxpool::brand!(Msgs);
/// let pool = PoolBuilder::<[u8; 64]>::zeroed(1024)
///     .cache_size(64)
///     .policy(FlushPolicy::Dpdk2607)
///     .name("msgs")
///     .build_named::<Msgs>()
///     .unwrap();
/// assert_eq!(pool.capacity(), 1024);
/// ```
pub struct PoolBuilder<'a, T: ?Sized + Element, R: Repr = crate::repr::DefaultRepr> {
    pub(crate) capacity: u32,
    /// `None`: the default, clamped at build time to what the policy accepts.
    pub(crate) cache_size: Option<u32>,
    pub(crate) policy: FlushPolicy,
    pub(crate) backing: BackingPolicy,
    pub(crate) prefault: bool,
    pub(crate) stride: StrideMode,
    pub(crate) max_threads: usize,
    pub(crate) name: Option<String>,
    pub(crate) ring_flags: RingFlags,
    pub(crate) init: Init<'a>,
    /// [`PoolBuilder::max_capacity`]: `None` is the capacity (no growth).
    pub(crate) max_capacity: Option<u32>,
    /// The initialiser of a pool with a maximum (`Init::Kept`), moved into the pool.
    pub(crate) grow_init: Option<InitFn<'static>>,
    /// Size and alignment of one object: `T`'s, or those [`PoolBuilder::bytes`] was given.
    pub(crate) layout: Layout,
    /// A `(len, align)` that [`PoolBuilder::bytes`] could not make a layout of (reported at build).
    bad_bytes: Option<(usize, usize)>,
    /// The reset hook ([`PoolBuilder::on_put`]).
    on_put: Option<crate::on_put::PutHook<T>>,
    /// The object type's own reset, composed at build to run before the user's `on_put` hook when
    /// there is one (packet buffers: the hook sees an empty buffer at the default headroom; without
    /// a hook, the get resets, `Element::RESET_ON_GET`). A function of the concrete type's module:
    /// a generic closure here would need `T: 'static`.
    pub(crate) reset: Option<fn(crate::on_put::PutHook<T>) -> crate::on_put::PutHook<T>>,
    /// An error a typed constructor found, reported by build before anything is claimed.
    pub(crate) deferred: Option<PoolError>,
    _repr: PhantomData<(R, crate::pool::Invariant<T>)>,
}

/// Default number of implicit per-thread cache slots per pool.
pub const DEFAULT_MAX_THREADS: usize = 256;
/// Largest accepted [`PoolBuilder::max_threads`] (2^20 slots, 16 MiB of slot array): a larger value
/// is a mistake to report (`InvalidConfig`), not an allocation to try.
pub const MAX_THREADS_LIMIT: usize = 1 << 20;
/// Default cache size (DPDK's maximum), lowered for pools of fewer than `8 x 512` objects (see
/// [`PoolBuilder::cache_size`]).
pub const DEFAULT_CACHE_SIZE: u32 = CACHE_MAX_SIZE;

/// The default cache size keeps each cache's flush threshold ([`FlushPolicy::fill_limit`]) at most
/// `capacity / DEFAULT_CACHE_SHARE`, so the objects idle in the caches of up to
/// `DEFAULT_CACHE_SHARE - 1` putting threads (pipeline consumers) leave some in the common ring for
/// a [`Pool::get_wait`] on another thread: a cache is thread-local and only its owner flushes it.
/// DPDK's rule (`rte_mempool_create_empty`) keeps only *one* cache's threshold within the pool;
/// DPDK sizes pools as `n >= lcores x cache_size x 1.5 + descriptors`. Guarantee: `get_wait` is
/// served while `threads that put x fill_limit < capacity`. A pool of fewer than
/// `DEFAULT_CACHE_SHARE` objects gets no cache by default.
pub(crate) const DEFAULT_CACHE_SHARE: u32 = 8;

impl<'a, T> PoolBuilder<'a, T> {
    fn new(capacity: u32, init: Init<'a>) -> Self {
        Self::with_layout(capacity, init, Layout::new::<T>())
    }
}

impl<'a, T: ?Sized + Element> PoolBuilder<'a, T> {
    pub(crate) fn with_layout(capacity: u32, init: Init<'a>, layout: Layout) -> Self {
        PoolBuilder {
            capacity,
            cache_size: None,
            policy: FlushPolicy::DEFAULT,
            backing: BackingPolicy::Auto,
            prefault: false,
            stride: StrideMode::Auto,
            max_threads: DEFAULT_MAX_THREADS,
            name: None,
            ring_flags: RingFlags::default(),
            init,
            max_capacity: None,
            grow_init: None,
            layout,
            bad_bytes: None,
            on_put: None,
            reset: None,
            deferred: None,
            _repr: PhantomData,
        }
    }
}

impl<'a> PoolBuilder<'a, [u8]> {
    /// A pool of `capacity` zeroed byte buffers of `len` bytes aligned to `align` (a power of two):
    /// the object size comes from configuration, as DPDK's `rte_mempool_create(name, n, elt_size,
    /// ..)` and an mbuf pool's data room. Handles are `Handle<[u8]>`; `pool.get_mut(&mut h)` is a
    /// `&mut [u8]` of `len` bytes; every pool operation is as for a sized `T`. Invalid
    /// `len`/`align` are [`PoolError::InvalidConfig`] at build.
    ///
    /// ```
    /// let data_room = 2048 + 128; // from configuration
    /// let pool = idxpool::PoolBuilder::bytes(1024, data_room, 64).cache_size(32).build()?;
    /// let mut burst = Vec::new();
    /// pool.get_bulk(&mut burst, 8)?;
    /// for (k, h) in burst.iter_mut().enumerate() {
    ///     let buf = pool.get_mut(h);
    ///     assert_eq!(buf.len(), data_room);
    ///     buf[0] = k as u8;
    /// }
    /// pool.put_bulk(&mut burst);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn bytes(capacity: u32, len: usize, align: usize) -> Self {
        // An invalid layout is reported by build, with the numbers.
        match Layout::from_size_align(len, align) {
            Ok(layout) => Self::with_layout(capacity, Init::Zeroed, layout),
            Err(_) => {
                let mut b = Self::with_layout(capacity, Init::Zeroed, Layout::new::<u8>());
                b.bad_bytes = Some((len, align));
                b
            }
        }
    }
}

impl<'a, T> PoolBuilder<'a, T> {
    /// A pool of `capacity` objects, object `i` made by `make(i)` at creation, in index order, and
    /// moved into place ([`PoolBuilder::with_init`] writes in place without a stack temporary). If
    /// `make` panics, the objects made are dropped, the region unmapped and the panic propagates.
    /// `make` is `Send`: a pool with a [`PoolBuilder::max_capacity`] keeps it and calls it from the
    /// thread that calls [`Pool::grow`].
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<u64>::with_fn(4, |i| u64::from(i) * 10);
    /// # let _ = pool;
    /// ```
    pub fn with_fn(capacity: u32, mut make: impl FnMut(u32) -> T + Send + 'a) -> Self {
        Self::new(
            capacity,
            Init::Each(Box::new(move |i, obj, written| {
                write_by_value(obj.into_uninit::<T>(), &mut make, i);
                written.store(true, Ordering::Relaxed);
            })),
        )
    }

    /// A pool of `capacity` objects, each initialised once in place by `init(index, slot)` at
    /// creation (DPDK's `obj_init`), in index order. `init` must return the [`Written`] proof, so
    /// an initialiser that forgets to write does not compile. If `init` panics, the objects made
    /// are dropped (the panicking call's too if [`InitSlot::write`] ran; one written through
    /// [`InitSlot::as_mut_ptr`] without [`InitSlot::assume_init`] is not known to be whole and is
    /// not), the region unmapped and the panic propagates. `init` is `Send`, as for
    /// [`PoolBuilder::with_fn`].
    ///
    /// ```
    /// struct Packet { len: u16, data: [u8; 2046] }
    /// let pool = idxpool::PoolBuilder::<Packet>::with_init(8, |_i, slot| {
    ///     slot.write(Packet { len: 0, data: [0; 2046] })
    /// });
    /// # let _ = pool;
    /// ```
    pub fn with_init(
        capacity: u32,
        init: impl for<'s> FnMut(u32, InitSlot<'s, T>) -> Written<'s> + Send + 'a,
    ) -> Self {
        let mut init = init;
        Self::new(
            capacity,
            Init::Each(Box::new(move |i, obj, written| {
                let slot = obj.into_uninit::<T>();
                // The proof can only come from this slot (fresh invariant lifetime per call).
                let _written: Written<'_> = init(
                    i,
                    InitSlot {
                        slot,
                        written,
                        _invariant: PhantomData,
                    },
                );
                written.store(true, Ordering::Relaxed);
            })),
        )
    }

    /// A pool of `capacity` objects, each `T::default()`.
    pub fn with_default(capacity: u32) -> Self
    where
        T: Default,
    {
        Self::with_fn(capacity, |_| T::default())
    }

    /// A pool of `capacity` all-zero objects (fresh anonymous memory: no pass over the region).
    pub fn zeroed(capacity: u32) -> Self
    where
        T: bytemuck::Zeroable,
    {
        Self::new(capacity, Init::Zeroed)
    }
}

impl<T: ?Sized + Element, R: Repr> PoolBuilder<'static, T, R> {
    /// Reserves room for up to `max` objects (default: the capacity, no growth); [`Pool::grow`]
    /// adds objects at run time. Everything that names an object is sized for `max` at build, so
    /// growth moves nothing handed out: the region reserves address space (`PROT_NONE`, no memory
    /// until `grow` maps it; the heap backing allocates it all), the common ring has `max` slots, a
    /// run-time pool's handle-space block covers `max`, debug builds keep a state byte per object,
    /// and the representation's limits apply to `max` ([`PoolError::ReprLimit`]). The initialiser
    /// is kept for `grow`, so it must be `'static` (this method exists only for such builders) and
    /// `Send`. A `max` below the capacity is [`PoolError::InvalidConfig`] at build.
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<u64>::with_fn(1000, |i| u64::from(i))
    ///     .max_capacity(100_000)
    ///     .build()?;
    /// assert_eq!(pool.capacity(), 1000);
    /// assert_eq!(pool.grow(500)?, 1500); // objects 1000..1500, made by the same closure
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn max_capacity(mut self, max: u32) -> Self {
        self.max_capacity = Some(max);
        self.init = match std::mem::replace(&mut self.init, Init::Zeroed) {
            Init::Each(f) => {
                self.grow_init = Some(f);
                Init::Kept
            }
            other => other,
        };
        self
    }
}

impl<'a, T: ?Sized + Element, R: Repr> PoolBuilder<'a, T, R> {
    /// Per-cache size in objects, 0..=512 (0: every get and put goes to the ring). A size the
    /// policy refuses for the capacity is an error at build. Default: 512, lowered to the largest
    /// size whose flush threshold is at most `capacity / 8`, so a few putting threads' caches
    /// cannot hold the whole pool and [`Pool::get_wait`] elsewhere is served. An explicit size is
    /// checked by DPDK's rule only ([`FlushPolicy::validate`]): waiters may then starve while other
    /// threads' caches hold the idle objects (DESIGN.md, "Waiting").
    ///
    /// ```
    /// use idxpool::{FlushPolicy, PoolBuilder};
    /// let small = PoolBuilder::<u64>::with_default(64).build()?;
    /// assert_eq!(small.cache_size(), 8); // threshold 8 <= 64 / 8
    /// let big = PoolBuilder::<u64>::with_default(8192).build()?;
    /// assert_eq!(big.cache_size(), 512);
    /// let classic = PoolBuilder::<u64>::with_default(64).policy(FlushPolicy::Classic).build()?;
    /// assert_eq!(classic.cache_size(), 5); // threshold 7 <= 8
    /// let tiny = PoolBuilder::<u64>::with_default(7).build()?;
    /// assert_eq!(tiny.cache_size(), 0); // every put reaches the ring
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn cache_size(mut self, n: u32) -> Self {
        self.cache_size = Some(n);
        self
    }

    /// Flush/refill policy of every cache of this pool. Default: [`FlushPolicy::DEFAULT`].
    pub fn policy(mut self, p: FlushPolicy) -> Self {
        self.policy = p;
        self
    }

    /// Memory backing. Default: [`BackingPolicy::Auto`].
    pub fn backing(mut self, b: BackingPolicy) -> Self {
        self.backing = b;
        self
    }

    /// Fault every page in at creation (`MAP_POPULATE`, or a write per page for THP). Default: off.
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }

    /// Object placement. Default: [`StrideMode::Auto`].
    pub fn stride(mut self, s: StrideMode) -> Self {
        self.stride = s;
        self
    }

    /// Implicit per-thread cache slots (threads with a higher tid use the ring directly),
    /// `1..=`[`MAX_THREADS_LIMIT`] (else `InvalidConfig` at build). Default: 256.
    pub fn max_threads(mut self, n: usize) -> Self {
        self.max_threads = n;
        self
    }

    /// A reset hook: `hook(obj)` runs once on every object given back, on every path (`put`,
    /// `put_bulk`, `put_array`, `put_from`, [`crate::LocalCache`] puts, a [`crate::Pooled`] or
    /// [`crate::HandleRing`] drop, the io_uring receiver), before it reaches a cache: e.g. zero a
    /// header or clear a `Vec` (capacity kept), so every `get` sees a reset object. For
    /// [`PoolBuilder::bytes`] pools `obj` is the `&mut [u8]`. Free objects are not visited again
    /// (flushes, thread exit and drop move only objects reset when put). Default: none (a pool
    /// without a hook tests one byte per put call, BENCHMARKS.md).
    ///
    /// Bulk paths call the hook per object, in order, in one out-of-line call per burst, with no
    /// cache of the pool borrowed (it may get and put objects of this pool). On a run-time pool
    /// every handle's identity is checked first: the hook never sees another pool's object.
    ///
    /// # Panics
    /// A panic of `hook` reaches the caller of the put after the whole burst is given back: nothing
    /// is lost or counted twice. One in a `Pooled` dropped during unwinding aborts, as any
    /// panicking destructor.
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<Vec<u8>>::with_fn(8, |_| Vec::with_capacity(1500))
    ///     .on_put(|v: &mut Vec<u8>| v.clear()) // capacity kept, contents gone
    ///     .build()?;
    /// let mut h = pool.get()?;
    /// pool.get_mut(&mut h).extend_from_slice(b"payload");
    /// pool.put(h);
    /// let h = pool.get()?;
    /// assert!(pool.get_ref(&h).is_empty() && pool.get_ref(&h).capacity() >= 1500);
    /// pool.put(h);
    ///
    /// // Byte buffers: zero the first 64 bytes (a header) of every buffer given back.
    /// let bufs = idxpool::PoolBuilder::bytes(16, 2048, 64)
    ///     .on_put(|b: &mut [u8]| b[..64].fill(0))
    ///     .build()?;
    /// let mut hs = Vec::new();
    /// bufs.get_bulk(&mut hs, 16)?;
    /// for h in hs.iter_mut() {
    ///     bufs.get_mut(h)[0] = 0xff;
    /// }
    /// bufs.put_bulk(&mut hs); // one out-of-line call runs the hook 16 times
    /// bufs.get_bulk(&mut hs, 16)?;
    /// assert!(hs.iter().all(|h| bufs.get_ref(h)[0] == 0));
    /// bufs.put_bulk(&mut hs);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn on_put(mut self, hook: impl Fn(&mut T) + Send + Sync + 'static) -> Self {
        self.on_put = Some(Box::new(hook));
        self
    }

    /// Name shown by `Debug`, `dump()` and error messages. Default: `idxpool-<n>`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Common ring modes: single producer and/or single consumer (cheaper when one thread ever
    /// flushes / refills). Default: MPMC. A single mode while several threads use the pool corrupts
    /// the ring's bookkeeping, hence `unsafe`.
    ///
    /// # Safety
    /// With `single_producer`, at most one thread may put into the ring at a time (flushes,
    /// bypassing puts and [`Pool::grow`]); likewise `single_consumer` for gets.
    pub unsafe fn ring_modes(mut self, single_producer: bool, single_consumer: bool) -> Self {
        self.ring_flags.single_producer = single_producer;
        self.ring_flags.single_consumer = single_consumer;
        self
    }

    /// Chooses the entry representation (default [`crate::Offset`]): [`crate::Index`] for regions
    /// beyond 32 GiB, [`crate::Pointer`] for the DPDK-style pointer twin. See [`crate::repr`].
    ///
    /// ```
    /// use idxpool::{Index, PoolBuilder};
    /// let pool = PoolBuilder::<[u8; 2048]>::zeroed(64).repr::<Index>().build()?;
    /// let h = pool.get()?; // its entry is the index + 1
    /// assert!(pool.index_of(&h) < 64);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn repr<R2: Repr>(self) -> PoolBuilder<'a, T, R2> {
        PoolBuilder {
            capacity: self.capacity,
            cache_size: self.cache_size,
            policy: self.policy,
            backing: self.backing,
            prefault: self.prefault,
            stride: self.stride,
            max_threads: self.max_threads,
            name: self.name,
            ring_flags: self.ring_flags,
            init: self.init,
            max_capacity: self.max_capacity,
            grow_init: self.grow_init,
            layout: self.layout,
            bad_bytes: self.bad_bytes,
            on_put: self.on_put,
            reset: self.reset,
            deferred: self.deferred,
            _repr: PhantomData,
        }
    }

    /// Creates a **run-time pool** ([`Runtime`] identity, [`crate::Pool`]'s default): no brand to
    /// declare, any number at once, stored anywhere. Its handles are 4 bytes; each use is checked
    /// with one range compare against the pool's range of the handle space (another pool's handle
    /// panics naming both, or is [`PoolError::ForeignHandle`] from the `try_` forms). See
    /// [`Runtime`].
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<[u8; 64]>::zeroed(1024).cache_size(32).build()?;
    /// let mut h = pool.get()?;
    /// pool.get_mut(&mut h)[0] = 7;
    /// assert_eq!(std::mem::size_of_val(&h), 4);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// [`PoolError::HandleSpaceExhausted`] when the handle space has no free aligned power-of-two
    /// block for the pool (`capacity x stride / 8` entries with offset entries, `capacity` with
    /// index entries: at most 16 GiB of offset-entry region per pool, 32 GiB in all, less when
    /// fragmented); [`PoolError::InvalidConfig`] for the pointer representation (run-time pools
    /// need 4-byte entries); configuration, size and backing errors as listed on [`PoolError`].
    pub fn build(self) -> Result<Pool<T, Runtime, R>, PoolError> {
        self.build_generic(None)
    }

    /// Creates a pool carrying the named brand `B` (declared with [`brand!`](macro@crate::brand)):
    /// the compiler rejects other pools' handles; no run-time check. At most one live pool per
    /// brand.
    ///
    /// ```
    /// idxpool::brand!(Msgs);
    /// let pool = idxpool::PoolBuilder::<[u8; 64]>::zeroed(1024).build_named::<Msgs>()?;
    /// let h: idxpool::Handle<[u8; 64], Msgs> = pool.get()?;
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// [`PoolError::BrandInUse`] when another live pool holds `B` (or one was dropped with handles
    /// outstanding); configuration, size, backing and [`PoolError::ReprLimit`] errors as on
    /// [`PoolError`].
    pub fn build_named<B: NamedBrand>(self) -> Result<Pool<T, B, R>, PoolError> {
        self.build_generic(Some((B::slot(), std::any::type_name::<B>())))
    }

    /// Creates a pool with a fresh brand and passes it to `f`, dropping it when `f` returns.
    /// Handles cannot leave `f` (their type names the brand). Any number may coexist; no run-time
    /// check.
    ///
    /// ```
    /// let sum = idxpool::PoolBuilder::<u64>::with_default(8).scoped(|pool| {
    ///     let mut h = pool.get().unwrap();
    ///     *pool.get_mut(&mut h) = 41;
    ///     let v = *pool.get_ref(&h) + 1;
    ///     pool.put(h);
    ///     v
    /// }).unwrap();
    /// assert_eq!(sum, 42);
    /// ```
    ///
    /// # Errors
    /// Configuration, size and backing errors as listed on [`PoolError`]; `f` is not called.
    pub fn scoped<Out>(
        self,
        f: impl for<'id> FnOnce(Pool<T, Scoped<'id>, R>) -> Out,
    ) -> Result<Out, PoolError> {
        Ok(f(self.build_generic(None)?))
    }

    /// Creates a pool whose handles neither the compiler nor the pool ties to it ([`Unchecked`]).
    ///
    /// # Safety
    /// Never pass a handle of one `Unchecked` pool to another `Unchecked` pool of the same `T` (it
    /// would alias objects), nor use a handle after its pool is dropped.
    ///
    /// # Errors
    /// As [`PoolBuilder::build_named`], without the brand.
    pub unsafe fn build_unchecked(self) -> Result<Pool<T, Unchecked, R>, PoolError> {
        self.build_generic(None)
    }

    pub(crate) fn build_generic<B: Brand>(
        mut self,
        brand: Option<(&'static BrandSlot, &'static str)>,
    ) -> Result<Pool<T, B, R>, PoolError> {
        // Validate everything before claiming anything.
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        if self.capacity == 0 {
            return Err(PoolError::config("capacity is 0"));
        }
        if let Some((len, align)) = self.bad_bytes {
            return Err(PoolError::config(format!(
                "byte buffers of {len} bytes aligned to {align}: the alignment must be a power \
                 of two and the length at most isize::MAX rounded to it"
            )));
        }
        let size = self.layout.size();
        let align = self.layout.align();
        if size == 0 {
            return Err(PoolError::config(
                "zero-sized object type: a pool of ZSTs has nothing to manage (use a counter)",
            ));
        }
        if self.max_threads == 0 || self.max_threads > MAX_THREADS_LIMIT {
            return Err(PoolError::config(format!(
                "max_threads {} outside 1..={MAX_THREADS_LIMIT}",
                self.max_threads
            )));
        }
        let max = self.max_capacity.unwrap_or(self.capacity);
        if max < self.capacity {
            return Err(PoolError::config(format!(
                "max_capacity {max} is below the capacity {}",
                self.capacity
            )));
        }
        let cache_size = match self.cache_size {
            Some(n) => n,
            None => default_cache_size(self.policy, self.capacity),
        };
        self.policy.validate(cache_size, self.capacity)?;
        let mut stride = self.stride.stride_for(size, align)?;
        if !matches!(self.stride, StrideMode::Bytes(_)) {
            // Every object aligned, not only the first (a no-op for sized types; byte buffers'
            // length need not be a multiple: tests/runtime_pools.rs).
            stride = stride
                .checked_next_multiple_of(align)
                .ok_or_else(|| PoolError::overflow("stride rounding to the alignment"))?;
        }
        if self.stride == StrideMode::Auto {
            // Auto also satisfies the representation (offset entries: multiples of 8).
            stride = stride
                .checked_next_multiple_of(R::STRIDE_MULTIPLE)
                .ok_or_else(|| PoolError::overflow("stride rounding"))?;
        }
        // Everything that names an object is sized for the maximum (growth moves nothing).
        let max_len = stride
            .checked_mul(max as usize)
            .ok_or_else(|| PoolError::overflow(format!("{max} objects x stride {stride}")))?;
        if max_len > isize::MAX as usize {
            return Err(PoolError::overflow(format!(
                "{max} objects x stride {stride} = {max_len} bytes exceeds isize::MAX"
            )));
        }
        let len = stride * self.capacity as usize; // <= max_len
                                                   // After the size checks: a size overflow is reported as such first.
        R::check_layout(stride, max)?;
        // SAFETY: single-thread modes only come from `ring_modes`, whose caller promised one
        // enqueuer (dequeuer) at a time; the default is MPMC.
        let ring = unsafe {
            crate::ring::Ring::<R::Entry>::with_start_counter(
                max,
                RingFlags {
                    exact_size: true,
                    ..self.ring_flags
                },
                0,
            )
        }?;
        let waiters = Box::new(crate::wait::WaitQueue::new());
        let core = PoolCore::new(ring, self.max_threads, cache_size, self.policy, waiters)?;
        let name = self.name.take().unwrap_or_else(|| {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            format!(
                "idxpool-{}",
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
        });
        if let Some((slot, bname)) = brand {
            slot.claim(bname)?;
        }
        // A run-time pool's range of the handle space (space.rs); none for brands.
        let space = if B::CHECKED {
            let need = R::space_needed(stride, max).ok_or_else(|| {
                PoolError::config(format!(
                    "run-time pools need 4-byte entries (offset or index), not {}",
                    R::NAME
                ))
            })?;
            Some(crate::space::claim(need, &name)?)
        } else {
            None
        };
        // From here on, an error must release the brand and the range (nothing minted yet).
        let release = |e: PoolError| {
            if let Some((slot, _)) = brand {
                slot.release(true);
            }
            if let Some(r) = space {
                crate::space::release(r, true);
            }
            e
        };
        let region = Region::map_growable(
            len,
            max_len,
            align.max(CACHE_LINE),
            self.backing,
            self.prefault,
        )
        .map_err(release)?;
        // After the mapping, so a pool far too large fails there, not after a state byte per
        // object.
        let states = ObjectStates::alloc(max).map_err(release)?;
        let geometry = match space {
            Some(r) => Geometry::with_range(region.base(), stride, max, r.lo, r.span),
            None => Geometry::new(region.base(), stride, max),
        }
        .with_elem_len(size);
        // The pool starts empty and gets its objects as a grow would: if the initialiser panics,
        // the objects made are dropped and the pool's drop releases brand and range and unmaps the
        // region.
        let pool = Pool::from_parts(
            geometry,
            region,
            Arc::new(core),
            name,
            brand.map(|b| b.0),
            space,
            states,
            Growth::new(0, self.grow_init.take()),
        )
        .with_on_put(match (self.reset.take(), self.on_put.take()) {
            (Some(compose), Some(user)) => Some(compose(user)),
            (_, user) => user,
        });
        let init: Option<&mut crate::pool::ObjectInit<'_>> = match &mut self.init {
            Init::Each(init) => Some(&mut **init),
            Init::Zeroed | Init::Kept => None, // Kept: the grow initialiser, in the pool
        };
        let mut held = pool.growth.state.lock();
        pool.add_objects(&mut held, init, self.capacity)?;
        // The initialiser is kept only by a pool that can grow (dropped after the lock).
        let kept = if max > self.capacity {
            None
        } else {
            held.take()
        };
        drop(held);
        drop(kept);
        Ok(pool)
    }
}
