//! The contenders: object types, one adapter per crate (the `Worker` trait), the checking
//! wrapper of the tests, and the list of contenders with their run functions.

#[allow(unused_imports)]
use super::*;

// ---- object types ---------------------------------------------------------------------------

/// An object type of the benchmark: `#[repr(C)]` with the u64 that every allocation writes
/// first, so `set_raw` can write it through a pointer to uninitialised memory.
pub(crate) trait Obj: Send + Sync + Default + sharded_slab::Clear + 'static {
    /// `8 B`, `64 B`, `2 KiB`.
    const LABEL: &'static str;
    /// This type's heapless `box_pool!` singleton.
    type Hp: BoxPool<Data = Self>;
    /// An object whose u64 is `v` (rest zero): what by-value APIs are given.
    fn with(v: u64) -> Self;
    fn set(&mut self, v: u64);
    fn val(&self) -> u64;
    /// Gives the heapless singleton its blocks, once per process.
    fn heapless_init();
}

/// Writes the leading u64 of an object in raw, possibly uninitialised memory.
///
/// # Safety
/// `p` must be valid for writes of `T` and aligned; `T: Obj` is `repr(C)` with a leading u64.
pub(crate) unsafe fn set_raw<T: Obj>(p: *mut T, v: u64) {
    // SAFETY: forwarded; offset 0 holds the u64.
    unsafe { p.cast::<u64>().write(v) }
}

/// Blocks given to each heapless singleton (the largest working set is the steady 4096 plus
/// the forward queue).
pub(crate) const HEAPLESS_BLOCKS: usize = 8192;

macro_rules! obj_type {
    ($name:ident, $hp:ident, $pad:expr, $label:expr) => {
        /// A benchmark object (see [`Obj`]).
        #[repr(C)]
        #[allow(dead_code)]
        pub struct $name {
            v: u64,
            pad: [u64; $pad],
        }
        impl Default for $name {
            fn default() -> Self {
                $name { v: 0, pad: [0; $pad] }
            }
        }
        impl sharded_slab::Clear for $name {
            fn clear(&mut self) {}
        }
        heapless::box_pool!($hp: $name);
        impl Obj for $name {
            const LABEL: &'static str = $label;
            type Hp = $hp;
            #[inline(always)]
            fn with(v: u64) -> Self {
                $name { v, pad: [0; $pad] }
            }
            #[inline(always)]
            fn set(&mut self, v: u64) {
                self.v = v;
            }
            #[inline(always)]
            fn val(&self) -> u64 {
                self.v
            }
            fn heapless_init() {
                static ONCE: Once = Once::new();
                ONCE.call_once(|| {
                    let blocks: &'static mut [BoxBlock<$name>] = Box::leak(
                        (0..HEAPLESS_BLOCKS)
                            .map(|_| BoxBlock::new())
                            .collect::<Vec<_>>()
                            .into_boxed_slice(),
                    );
                    for b in blocks {
                        $hp.manage(b);
                    }
                });
            }
        }
    };
}

obj_type!(O8, HpO8, 0, "8 B");
obj_type!(O64, HpO64, 7, "64 B");
obj_type!(O2K, HpO2K, 255, "2 KiB");

/// Object sizes in bytes, in column order.
pub(crate) const SIZES: [usize; 3] = [8, 64, 2048];

pub(crate) fn size_label(size: usize) -> &'static str {
    match size {
        8 => O8::LABEL,
        64 => O64::LABEL,
        _ => O2K::LABEL,
    }
}

// ---- adapters -------------------------------------------------------------------------------

/// One user of a contender (one thread's view): allocate an object and write its u64, free it.
pub(crate) trait Worker {
    /// What the user holds for one object.
    type H;
    fn alloc(&mut self, v: u64) -> Self::H;
    fn free(&mut self, h: Self::H);
    /// The object's u64.
    fn val(&self, h: &Self::H) -> u64;
    /// The object's identity for the distinctness checks: its address, or its key for the
    /// containers that move objects when they grow (slotmap, slab).
    fn id(&self, h: &Self::H) -> usize;
    /// Appends `n` objects written with `v, v+1, ..` (bulk where the API has it).
    fn alloc_n(&mut self, out: &mut Vec<Self::H>, n: usize, v: u64) {
        for i in 0..n {
            out.push(self.alloc(v + i as u64));
        }
    }
    /// Frees every object of `hs` (bulk where the API has it), leaving it empty.
    fn free_all(&mut self, hs: &mut Vec<Self::H>) {
        for h in hs.drain(..) {
            self.free(h);
        }
    }
}

pub(crate) const SIZED: &str = "pool sized for the workload";

/// idxpool (index or pointer twin) through a user-owned cache.
pub(crate) struct IdxCache<'p, T: Obj, B: Brand, R: Repr> {
    pub(crate) c: LocalCache<&'p Pool<T, B, R>>,
    pub(crate) bulk: bool,
}

impl<T: Obj, B: Brand, R: Repr> Worker for IdxCache<'_, T, B, R> {
    type H = Handle<T, B, R>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        let mut h = self.c.get().expect(SIZED);
        self.c.pool().get_mut(&mut h).set(v);
        h
    }
    #[inline(always)]
    fn free(&mut self, h: Self::H) {
        self.c.put(h);
    }
    fn val(&self, h: &Self::H) -> u64 {
        self.c.pool().get_ref(h).val()
    }
    fn id(&self, h: &Self::H) -> usize {
        self.c.pool().as_ptr(h).as_ptr() as usize
    }
    #[inline(always)]
    fn alloc_n(&mut self, out: &mut Vec<Self::H>, n: usize, v: u64) {
        if !self.bulk {
            for i in 0..n {
                out.push(self.alloc(v + i as u64));
            }
            return;
        }
        let start = out.len();
        self.c.get_bulk(out, n).expect(SIZED);
        for (i, h) in out[start..].iter_mut().enumerate() {
            self.c.pool().get_mut(h).set(v + i as u64);
        }
    }
    #[inline(always)]
    fn free_all(&mut self, hs: &mut Vec<Self::H>) {
        if self.bulk {
            self.c.put_bulk(hs);
        } else {
            for h in hs.drain(..) {
                self.c.put(h);
            }
        }
    }
}

/// idxpool through the implicit per-thread cache: `pool.get()` / `pool.put()`.
pub(crate) struct IdxImplicit<'p, T: Obj, B: Brand, R: Repr>(pub(crate) &'p Pool<T, B, R>);

impl<T: Obj, B: Brand, R: Repr> Worker for IdxImplicit<'_, T, B, R> {
    type H = Handle<T, B, R>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        let mut h = self.0.get().expect(SIZED);
        self.0.get_mut(&mut h).set(v);
        h
    }
    #[inline(always)]
    fn free(&mut self, h: Self::H) {
        self.0.put(h);
    }
    fn val(&self, h: &Self::H) -> u64 {
        self.0.get_ref(h).val()
    }
    fn id(&self, h: &Self::H) -> usize {
        self.0.as_ptr(h).as_ptr() as usize
    }
}

/// `sharded_slab::Pool`: objects reused in place, `usize` keys.
pub(crate) struct ShardedSlab<'a, T: Obj>(pub(crate) &'a sharded_slab::Pool<T>);

impl<T: Obj> Worker for ShardedSlab<'_, T> {
    type H = usize;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> usize {
        self.0.create_with(|o| o.set(v)).expect(SIZED)
    }
    #[inline(always)]
    fn free(&mut self, k: usize) {
        let ok = self.0.clear(k);
        debug_assert!(ok);
    }
    fn val(&self, k: &usize) -> u64 {
        self.0.get(*k).expect("live key").val()
    }
    fn id(&self, k: &usize) -> usize {
        &*self.0.get(*k).expect("live key") as *const T as usize
    }
}

/// `lockfree_object_pool::LinearObjectPool`: the handle is an RAII guard; dropping frees.
pub(crate) struct LockfreePool<'a, T: Obj>(
    pub(crate) &'a lockfree_object_pool::LinearObjectPool<T>,
);

impl<'a, T: Obj> Worker for LockfreePool<'a, T> {
    type H = lockfree_object_pool::LinearReusable<'a, T>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        let mut g = self.0.pull();
        g.set(v);
        g
    }
    #[inline(always)]
    fn free(&mut self, h: Self::H) {
        drop(h);
    }
    fn val(&self, h: &Self::H) -> u64 {
        h.val()
    }
    fn id(&self, h: &Self::H) -> usize {
        &**h as *const T as usize
    }
}

/// heapless `box_pool!` singleton of `T` (a tagged Treiber stack; 16-byte boxes on 64-bit).
pub(crate) struct Heapless<T: Obj>(pub(crate) PhantomData<T>);

impl<T: Obj> Worker for Heapless<T> {
    type H = heapless::pool::boxed::Box<T::Hp>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        <T::Hp as BoxPool>::alloc(T::with(v)).ok().expect(SIZED)
    }
    #[inline(always)]
    fn free(&mut self, h: Self::H) {
        drop(h);
    }
    fn val(&self, h: &Self::H) -> u64 {
        h.val()
    }
    fn id(&self, h: &Self::H) -> usize {
        &**h as *const T as usize
    }
}

/// A `Vec<T>` of objects and a crossbeam `ArrayQueue<u32>` of the free indices.
pub(crate) struct FreeList<T> {
    pub(crate) free: ArrayQueue<u32>,
    pub(crate) objs: Box<[UnsafeCell<T>]>,
}

// SAFETY: an object is reached only through the index popped from `free`, which one user owns
// until it pushes the index back: objects move between threads (T: Send) but are never shared.
unsafe impl<T: Send> Sync for FreeList<T> {}

impl<T: Obj> FreeList<T> {
    pub(crate) fn new(n: usize) -> Self {
        let free = ArrayQueue::new(n);
        for i in 0..n as u32 {
            free.push(i).expect("room for every index");
        }
        FreeList {
            free,
            objs: (0..n).map(|_| UnsafeCell::new(T::default())).collect(),
        }
    }
}

pub(crate) struct ArrayQueueFree<'a, T>(pub(crate) &'a FreeList<T>);

impl<T: Obj> Worker for ArrayQueueFree<'_, T> {
    type H = u32;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> u32 {
        let i = self.0.free.pop().expect(SIZED);
        // SAFETY: index i was just popped from the free list, so this user owns object i.
        unsafe { (*self.0.objs[i as usize].get()).set(v) };
        i
    }
    #[inline(always)]
    fn free(&mut self, i: u32) {
        // Cannot overflow: the queue has room for every index and i was popped from it.
        let _ = self.0.free.push(i);
    }
    fn val(&self, i: &u32) -> u64 {
        // SAFETY: the caller owns index i (popped, not yet pushed back).
        unsafe { (*self.0.objs[*i as usize].get()).val() }
    }
    fn id(&self, i: &u32) -> usize {
        self.0.objs[*i as usize].get() as usize
    }
}

/// Not an allocator: the floor of a workload. Objects are taken round-robin from a fixed array
/// with no bookkeeping and "freed" by doing nothing, so a figure of this contender is the cost
/// of the workload itself (writes, reads, the forward queue and its cross-core traffic). Valid
/// only while fewer than `objs.len()` objects are live (burst, forward).
pub(crate) struct Floor<T> {
    pub(crate) objs: Box<[UnsafeCell<T>]>,
}

// SAFETY: each object is used by one thread at a time: the producer reuses object i only
// `objs.len()` allocations later, by which time the consumer has read it (at most the queue
// capacity plus two bursts are in flight, far fewer than `objs.len()`, and the queue's
// release/acquire orders the consumer's read before the producer's reuse).
unsafe impl<T: Send> Sync for Floor<T> {}

pub(crate) struct FloorW<'a, T> {
    pub(crate) f: &'a Floor<T>,
    pub(crate) next: usize,
}

impl<T: Obj> Worker for FloorW<'_, T> {
    type H = u32;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> u32 {
        let i = self.next;
        self.next = if i + 1 == self.f.objs.len() { 0 } else { i + 1 };
        // SAFETY: see Floor: object i is not in use by anyone else.
        unsafe { (*self.f.objs[i].get()).set(v) };
        i as u32
    }
    #[inline(always)]
    fn free(&mut self, _: u32) {}
    fn val(&self, i: &u32) -> u64 {
        // SAFETY: see Floor.
        unsafe { (*self.f.objs[*i as usize].get()).val() }
    }
    fn id(&self, i: &u32) -> usize {
        *i as usize
    }
}

/// `slotmap::SlotMap` (single thread; generational 8-byte keys).
pub(crate) struct SlotMapW<T: Obj>(pub(crate) slotmap::SlotMap<slotmap::DefaultKey, T>);

impl<T: Obj> Worker for SlotMapW<T> {
    type H = slotmap::DefaultKey;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        self.0.insert(T::with(v))
    }
    #[inline(always)]
    fn free(&mut self, k: Self::H) {
        let o = self.0.remove(k);
        debug_assert!(o.is_some());
    }
    fn val(&self, k: &Self::H) -> u64 {
        self.0[*k].val()
    }
    fn id(&self, k: &Self::H) -> usize {
        slotmap::Key::data(k).as_ffi() as usize
    }
}

/// `slab::Slab` (single thread; `usize` keys).
pub(crate) struct SlabW<T: Obj>(pub(crate) slab::Slab<T>);

impl<T: Obj> Worker for SlabW<T> {
    type H = usize;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> usize {
        self.0.insert(T::with(v))
    }
    #[inline(always)]
    fn free(&mut self, k: usize) {
        drop(self.0.remove(k));
    }
    fn val(&self, k: &usize) -> u64 {
        self.0[*k].val()
    }
    fn id(&self, k: &usize) -> usize {
        *k
    }
}

/// An object from a `GlobalAlloc` (a `Box<T>` without the `Box`).
pub(crate) struct RawBox<T>(pub(crate) NonNull<T>);

// SAFETY: the pointer is the unique owner of its allocation (like Box<T>); all three allocators
// allow freeing from another thread.
unsafe impl<T: Send> Send for RawBox<T> {}

/// `A::alloc` / `A::dealloc` with `Layout::new::<T>()`, writing the object's u64.
pub(crate) struct RawAlloc<A, T>(pub(crate) A, pub(crate) PhantomData<T>);

impl<A: GlobalAlloc, T: Obj> Worker for RawAlloc<A, T> {
    type H = RawBox<T>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> RawBox<T> {
        // SAFETY: Layout::new::<T>() has non-zero size.
        let p = unsafe { self.0.alloc(Layout::new::<T>()) }.cast::<T>();
        let p = NonNull::new(p).expect("out of memory");
        // SAFETY: p is a fresh allocation for one T.
        unsafe { set_raw(p.as_ptr(), v) };
        RawBox(p)
    }
    #[inline(always)]
    fn free(&mut self, h: RawBox<T>) {
        // SAFETY: h came from self.0.alloc with this layout and is freed once (moved in).
        unsafe { self.0.dealloc(h.0.as_ptr().cast(), Layout::new::<T>()) }
    }
    fn val(&self, h: &RawBox<T>) -> u64 {
        // SAFETY: the leading u64 was written at allocation.
        unsafe { h.0.as_ptr().cast::<u64>().read() }
    }
    fn id(&self, h: &RawBox<T>) -> usize {
        h.0.as_ptr() as usize
    }
}

// ---- checking wrapper (tests) ---------------------------------------------------------------

/// Shared record of a checked run: live objects (identity -> value written), allocations and
/// frees counted.
#[derive(Default)]
pub(crate) struct CheckLog {
    pub(crate) live: Mutex<HashMap<usize, u64>>,
    pub(crate) allocs: AtomicUsize,
    pub(crate) frees: AtomicUsize,
}

/// Wraps a worker and asserts that every allocation is a distinct live object holding the
/// value just written, and that every free names a live object still holding its value.
pub(crate) struct Checked<'a, W> {
    pub(crate) w: &'a mut W,
    pub(crate) log: &'a CheckLog,
}

impl<W: Worker> Checked<'_, W> {
    pub(crate) fn got(&self, h: &W::H, v: u64) {
        assert_eq!(self.w.val(h), v, "value written at allocation lost");
        let a = self.w.id(h);
        assert!(
            self.log.live.lock().unwrap().insert(a, v).is_none(),
            "object {a:#x} handed out while live"
        );
        self.log.allocs.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn gone(&self, h: &W::H) {
        let a = self.w.id(h);
        let v = self.log.live.lock().unwrap().remove(&a);
        assert_eq!(
            v,
            Some(self.w.val(h)),
            "freeing {a:#x}: not live or value clobbered"
        );
        self.log.frees.fetch_add(1, Ordering::Relaxed);
    }
}

impl<W: Worker> Worker for Checked<'_, W> {
    type H = W::H;
    fn alloc(&mut self, v: u64) -> W::H {
        let h = self.w.alloc(v);
        self.got(&h, v);
        h
    }
    fn free(&mut self, h: W::H) {
        self.gone(&h);
        self.w.free(h);
    }
    fn val(&self, h: &W::H) -> u64 {
        self.w.val(h)
    }
    fn id(&self, h: &W::H) -> usize {
        self.w.id(h)
    }
    fn alloc_n(&mut self, out: &mut Vec<W::H>, n: usize, v: u64) {
        let start = out.len();
        self.w.alloc_n(out, n, v);
        assert_eq!(out.len(), start + n);
        for (i, h) in out[start..].iter().enumerate() {
            self.got(h, v + i as u64);
        }
    }
    fn free_all(&mut self, hs: &mut Vec<W::H>) {
        for h in hs.iter() {
            self.gone(h);
        }
        self.w.free_all(hs);
        assert!(hs.is_empty());
    }
}

// ---- contenders -----------------------------------------------------------------------------

pub(crate) type RunFn = fn(&Job) -> f64;

/// A contender: its name, whether it can be shared between threads, how it is driven, and its
/// run function for each object size (in [`SIZES`] order).
pub(crate) struct Contender {
    pub(crate) name: &'static str,
    pub(crate) multi: bool,
    pub(crate) run: [RunFn; 3],
}

impl Contender {
    /// Whether this contender takes part in `wl`.
    pub(crate) fn supports(&self, wl: Workload) -> bool {
        match wl {
            Workload::Forward | Workload::ForwardBurst => self.multi,
            Workload::Steady => self.name != FLOOR,
            Workload::Burst => true,
        }
    }
}

/// The no-allocator floor (see [`Floor`]).
pub(crate) const FLOOR: &str = "floor-no-alloc";

/// The reference of every ratio.
pub(crate) const REFERENCE: &str = "idxpool-explicit";

/// Backings idxpool's benchmark pools got (printed once).
pub(crate) static BACKINGS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

pub(crate) fn note_backing(b: &idxpool::BackingReport) {
    if let Ok(mut s) = BACKINGS.lock() {
        s.insert(b.backing.to_string());
    }
}

pub(crate) fn idx_builder<'a, T: Obj>(job: &Job) -> PoolBuilder<'a, T> {
    PoolBuilder::<T>::with_default(job.p.pool_cap)
}

pub(crate) fn run_idx_explicit<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped(|pool| {
            note_backing(pool.backing());
            job.run(|| IdxCache {
                c: pool.local_cache(),
                bulk: true,
            })
        })
        .expect("idxpool pool")
}

pub(crate) fn run_idx_explicit_1<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped(|pool| {
            job.run(|| IdxCache {
                c: pool.local_cache(),
                bulk: false,
            })
        })
        .expect("idxpool pool")
}

pub(crate) fn run_idx_implicit<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped(|pool| job.run(|| IdxImplicit(&pool)))
        .expect("idxpool pool")
}

pub(crate) fn run_idx_ptr<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .repr::<idxpool::Pointer>()
        .scoped(|pool| {
            job.run(|| IdxCache {
                c: pool.local_cache(),
                bulk: true,
            })
        })
        .expect("idxpool pointer pool")
}

pub(crate) fn run_sharded<T: Obj>(job: &Job) -> f64 {
    let pool = sharded_slab::Pool::<T>::new();
    job.run(|| ShardedSlab(&pool))
}

pub(crate) fn run_lockfree<T: Obj>(job: &Job) -> f64 {
    let pool = lockfree_object_pool::LinearObjectPool::<T>::new(T::default, |_| ());
    job.run(|| LockfreePool(&pool))
}

pub(crate) fn run_heapless<T: Obj>(job: &Job) -> f64 {
    T::heapless_init();
    job.run(|| Heapless::<T>(PhantomData))
}

pub(crate) fn run_arrayqueue<T: Obj>(job: &Job) -> f64 {
    let fl = FreeList::<T>::new(job.p.pool_cap as usize);
    job.run(|| ArrayQueueFree(&fl))
}

pub(crate) fn run_floor<T: Obj>(job: &Job) -> f64 {
    let f = Floor::<T> {
        objs: (0..job.p.pool_cap)
            .map(|_| UnsafeCell::new(T::default()))
            .collect(),
    };
    job.run(|| FloorW { f: &f, next: 0 })
}

pub(crate) fn run_slotmap<T: Obj>(job: &Job) -> f64 {
    job.run(|| SlotMapW::<T>(slotmap::SlotMap::new()))
}

pub(crate) fn run_slab<T: Obj>(job: &Job) -> f64 {
    job.run(|| SlabW::<T>(slab::Slab::new()))
}

pub(crate) fn run_system<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(System, PhantomData))
}

pub(crate) fn run_mimalloc<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(mimalloc::MiMalloc, PhantomData))
}

pub(crate) fn run_jemalloc<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(tikv_jemallocator::Jemalloc, PhantomData))
}

macro_rules! per_size {
    ($f:ident) => {
        [$f::<O8> as RunFn, $f::<O64> as RunFn, $f::<O2K> as RunFn]
    };
}

pub(crate) fn contenders() -> Vec<Contender> {
    let c = |name, multi, run| Contender { name, multi, run };
    vec![
        c(REFERENCE, true, per_size!(run_idx_explicit)),
        c("idxpool-explicit-1", true, per_size!(run_idx_explicit_1)),
        c("idxpool-implicit", true, per_size!(run_idx_implicit)),
        c("idxpool-ptr", true, per_size!(run_idx_ptr)),
        c("sharded-slab", true, per_size!(run_sharded)),
        c("lockfree-object-pool", true, per_size!(run_lockfree)),
        c("heapless-pool", true, per_size!(run_heapless)),
        c("crossbeam-arrayqueue", true, per_size!(run_arrayqueue)),
        c("slotmap", false, per_size!(run_slotmap)),
        c("slab", false, per_size!(run_slab)),
        c("box-system", true, per_size!(run_system)),
        c("box-mimalloc", true, per_size!(run_mimalloc)),
        c("box-jemalloc", true, per_size!(run_jemalloc)),
        c(FLOOR, true, per_size!(run_floor)),
    ]
}

/// A peer: neither idxpool nor the floor.
pub(crate) fn is_peer(name: &str) -> bool {
    !name.starts_with("idxpool") && name != FLOOR
}
