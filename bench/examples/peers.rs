//! idxpool side by side with the crates Rust users would pick instead (issue 6).
//!
//! Every contender lives in this one binary and process; for each (workload, object size) the
//! contenders run round-robin, several repetitions, and the table shows the median, so that the
//! ratios hold on a small, noisy machine. Each sample builds its contender afresh, pre-warms it
//! (the working set is allocated once and freed before the clock starts, plus a warm-up tenth of
//! the run), and times only steady-state work: never growth or first-touch page faults.
//!
//! ```text
//! cargo run --release -p idxpool-bench --example peers -- --quick                 # < 60 s
//! cargo run --release -p idxpool-bench --example peers -- --csv target/peers.csv  # ~ minutes; also writes peers.svg
//! cargo run --release -p idxpool-bench --example peers -- --filter forward,jemalloc --reps 9
//! ```
//!
//! Contenders (names as printed):
//! * `idxpool-explicit`: a [`idxpool::LocalCache`] per thread; bursts through `get_bulk` /
//!   `put_bulk` (burst, forward), single `get`/`put` in steady. The reference of every ratio.
//! * `idxpool-explicit-1`: the same cache, one object per call everywhere.
//! * `idxpool-implicit`: `pool.get()` / `pool.put()` (per-thread cache found through TLS), one
//!   object per call.
//! * `idxpool-ptr`: the pointer twin ([`idxpool::ptr`], 8-byte entries), explicit cache, bulk
//!   as `idxpool-explicit`.
//! * `sharded-slab`: `sharded_slab::Pool` (`create_with` writes in place, `clear` frees).
//! * `lockfree-object-pool`: `LinearObjectPool` (RAII guard, no-op reset).
//! * `heapless-pool`: heapless 0.9 `box_pool!` (by-value `alloc(value)`: writes the whole object).
//! * `crossbeam-arrayqueue`: `ArrayQueue<u32>` as the free list of a `Vec<T>`.
//! * `slotmap`, `slab`: single thread only (burst, steady); by-value `insert`.
//! * `box-system`, `box-mimalloc`, `box-jemalloc`: `GlobalAlloc::alloc/dealloc` with
//!   `Layout::new::<T>()` called directly on `std::alloc::System`, `mimalloc::MiMalloc` and
//!   `tikv_jemallocator::Jemalloc`, so that all three coexist in one binary.
//! * `floor-no-alloc`: no allocator at all (objects taken round-robin from an array, frees do
//!   nothing): the cost of the workload itself, shown to tell allocator cost from transport
//!   cost (burst, forward; never counted as a peer).
//!
//! Workloads: `burst` (allocate 32, write each, free 32; one thread), `steady` (4096 live
//! objects, replace a random one per step: free, allocate, write), `forward` (allocate on thread
//! A, hand the handle to thread B through a bounded `crossbeam_queue::ArrayQueue`, B reads and
//! frees: the RX/TX pattern; threads pinned to CPUs 0 and 1), `forward-burst` (the same, the
//! queue carrying bursts of 32 handles as DPDK's RX/TX rings do), `scan` (touch every object of a
//! 1 GiB idxpool pool in a random order, hugetlb 2 MiB vs THP vs 4 KiB pages: the TLB effect;
//! 256 MiB with `--quick`).
//!
//! The harness is unit-tested (`cargo test -p idxpool-bench --example peers`): every contender's adapter runs
//! every workload through a checker that asserts distinct live objects, intact values and
//! frees == allocs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::hint::black_box;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, Once};
use std::time::Instant;

use clap::Parser;
use crossbeam_queue::ArrayQueue;
use heapless::pool::boxed::{BoxBlock, BoxPool};
use idxpool::repr::Repr;
use idxpool::{
    Backing, BackingPolicy, Brand, GenericHandle, GenericPool, LocalCache, NamedBrand, PoolBuilder,
    PoolError,
};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

// ---- heap accounting ------------------------------------------------------------------------

/// The global allocator: `System`, plus a per-thread byte count that is only kept while a
/// memory measurement runs on that thread (one TLS read per call otherwise). The timed paths of
/// the contenders do not allocate through it (pools are pre-warmed; the three `box-*`
/// contenders call their allocators directly).
struct CountingAlloc;

thread_local! {
    static COUNT_ON: Cell<bool> = const { Cell::new(false) };
    static COUNTED: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = COUNT_ON.try_with(|on| {
        if on.get() {
            let _ = COUNTED.try_with(|c| c.set(c.get() + delta));
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the GlobalAlloc
// contract; the bookkeeping touches only const-initialised thread-locals (no allocation).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count(-(l.size() as isize));
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            count(new as isize - l.size() as isize);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Runs `f` and returns its result with the net bytes it requested from the global allocator
/// on this thread (requested sizes, not malloc's own headers).
fn counted<R>(f: impl FnOnce() -> R) -> (R, isize) {
    COUNTED.with(|c| c.set(0));
    COUNT_ON.with(|c| c.set(true));
    let r = f();
    COUNT_ON.with(|c| c.set(false));
    (r, COUNTED.with(|c| c.get()))
}

// ---- object types ---------------------------------------------------------------------------

/// An object type of the benchmark: `#[repr(C)]` with the u64 that every allocation writes
/// first, so `set_raw` can write it through a pointer to uninitialised memory.
trait Obj: Send + Sync + Default + sharded_slab::Clear + 'static {
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
unsafe fn set_raw<T: Obj>(p: *mut T, v: u64) {
    // SAFETY: forwarded; offset 0 holds the u64.
    unsafe { p.cast::<u64>().write(v) }
}

/// Blocks given to each heapless singleton (the largest working set is the steady 4096 plus
/// the forward queue).
const HEAPLESS_BLOCKS: usize = 8192;

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
const SIZES: [usize; 3] = [8, 64, 2048];

fn size_label(size: usize) -> &'static str {
    match size {
        8 => O8::LABEL,
        64 => O64::LABEL,
        _ => O2K::LABEL,
    }
}

// ---- adapters -------------------------------------------------------------------------------

/// One user of a contender (one thread's view): allocate an object and write its u64, free it.
trait Worker {
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

const SIZED: &str = "pool sized for the workload";

/// idxpool (index or pointer twin) through a user-owned cache.
struct IdxCache<'p, T: Obj, B: Brand, R: Repr> {
    c: LocalCache<'p, T, B, R>,
    bulk: bool,
}

impl<T: Obj, B: Brand, R: Repr> Worker for IdxCache<'_, T, B, R> {
    type H = GenericHandle<T, B, R>;
    #[inline(always)]
    fn alloc(&mut self, v: u64) -> Self::H {
        let mut h = self.c.get().expect(SIZED);
        self.c.get_mut(&mut h).set(v);
        h
    }
    #[inline(always)]
    fn free(&mut self, h: Self::H) {
        self.c.put(h);
    }
    fn val(&self, h: &Self::H) -> u64 {
        self.c.get_ref(h).val()
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
            self.c.get_mut(h).set(v + i as u64);
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
struct IdxImplicit<'p, T: Obj, B: Brand, R: Repr>(&'p GenericPool<T, B, R>);

impl<T: Obj, B: Brand, R: Repr> Worker for IdxImplicit<'_, T, B, R> {
    type H = GenericHandle<T, B, R>;
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
struct ShardedSlab<'a, T: Obj>(&'a sharded_slab::Pool<T>);

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
struct LockfreePool<'a, T: Obj>(&'a lockfree_object_pool::LinearObjectPool<T>);

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
struct Heapless<T: Obj>(PhantomData<T>);

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
struct FreeList<T> {
    free: ArrayQueue<u32>,
    objs: Box<[UnsafeCell<T>]>,
}

// SAFETY: an object is reached only through the index popped from `free`, which one user owns
// until it pushes the index back: objects move between threads (T: Send) but are never shared.
unsafe impl<T: Send> Sync for FreeList<T> {}

impl<T: Obj> FreeList<T> {
    fn new(n: usize) -> Self {
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

struct ArrayQueueFree<'a, T>(&'a FreeList<T>);

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
struct Floor<T> {
    objs: Box<[UnsafeCell<T>]>,
}

// SAFETY: each object is used by one thread at a time: the producer reuses object i only
// `objs.len()` allocations later, by which time the consumer has read it (at most the queue
// capacity plus two bursts are in flight, far fewer than `objs.len()`, and the queue's
// release/acquire orders the consumer's read before the producer's reuse).
unsafe impl<T: Send> Sync for Floor<T> {}

struct FloorW<'a, T> {
    f: &'a Floor<T>,
    next: usize,
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
struct SlotMapW<T: Obj>(slotmap::SlotMap<slotmap::DefaultKey, T>);

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
struct SlabW<T: Obj>(slab::Slab<T>);

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
struct RawBox<T>(NonNull<T>);

// SAFETY: the pointer is the unique owner of its allocation (like Box<T>); all three allocators
// allow freeing from another thread.
unsafe impl<T: Send> Send for RawBox<T> {}

/// `A::alloc` / `A::dealloc` with `Layout::new::<T>()`, writing the object's u64.
struct RawAlloc<A, T>(A, PhantomData<T>);

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
struct CheckLog {
    live: Mutex<HashMap<usize, u64>>,
    allocs: AtomicUsize,
    frees: AtomicUsize,
}

/// Wraps a worker and asserts that every allocation is a distinct live object holding the
/// value just written, and that every free names a live object still holding its value.
struct Checked<'a, W> {
    w: &'a mut W,
    log: &'a CheckLog,
}

impl<W: Worker> Checked<'_, W> {
    fn got(&self, h: &W::H, v: u64) {
        assert_eq!(self.w.val(h), v, "value written at allocation lost");
        let a = self.w.id(h);
        assert!(
            self.log.live.lock().unwrap().insert(a, v).is_none(),
            "object {a:#x} handed out while live"
        );
        self.log.allocs.fetch_add(1, Ordering::Relaxed);
    }
    fn gone(&self, h: &W::H) {
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

// ---- workloads ------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Burst,
    Steady,
    Forward,
    ForwardBurst,
}

impl Workload {
    const ALL: [Workload; 4] = [
        Workload::Burst,
        Workload::Steady,
        Workload::Forward,
        Workload::ForwardBurst,
    ];
    fn name(self) -> &'static str {
        match self {
            Workload::Burst => "burst",
            Workload::Steady => "steady",
            Workload::Forward => "forward",
            Workload::ForwardBurst => "forward-burst",
        }
    }
    fn threads(self) -> usize {
        match self {
            Workload::Forward | Workload::ForwardBurst => 2,
            _ => 1,
        }
    }
}

/// Sizes of one run.
struct Params {
    /// Bursts of `BURST` objects per burst sample.
    burst_rounds: usize,
    /// Live objects in steady.
    steady_live: usize,
    /// Slot replaced at each steady step (precomputed, the same for every contender).
    steady_idx: Vec<u32>,
    /// Objects forwarded per forward sample.
    forward_total: usize,
    /// Capacity of the forward queue.
    queue_cap: usize,
    /// Capacity of fixed-size contenders (idxpool, the ArrayQueue free list).
    pool_cap: u32,
}

const BURST: usize = 32;

impl Params {
    fn new(quick: bool) -> Self {
        let (burst_rounds, steps, forward_total) = if quick {
            (20_000, 500_000, 250_000)
        } else {
            (100_000, 2_000_000, 600_000)
        };
        Params::sized(burst_rounds, 4096, steps, forward_total, 1024, 8192)
    }

    fn sized(
        burst_rounds: usize,
        steady_live: usize,
        steps: usize,
        forward_total: usize,
        queue_cap: usize,
        pool_cap: u32,
    ) -> Self {
        let mut rng = SmallRng::seed_from_u64(0x1d7_9001);
        Params {
            burst_rounds,
            steady_live,
            steady_idx: (0..steps)
                .map(|_| rng.gen_range(0..steady_live as u32))
                .collect(),
            forward_total,
            queue_cap,
            pool_cap,
        }
    }
}

/// One sample to take: a workload with its sizes, optionally checked.
struct Job<'a> {
    wl: Workload,
    p: &'a Params,
    check: Option<&'a CheckLog>,
}

impl Job<'_> {
    /// Runs the workload with workers made by `mk` (one per thread) and returns ns per object.
    fn run<W, F>(&self, mk: F) -> f64
    where
        W: Worker,
        W::H: Send,
        F: Fn() -> W + Sync,
    {
        match self.wl {
            Workload::Burst | Workload::Steady => {
                let mut w = mk();
                match self.check {
                    Some(log) => self.single(&mut Checked { w: &mut w, log }),
                    None => self.single(&mut w),
                }
            }
            Workload::Forward => forward(&mk, self.p, self.check, false),
            Workload::ForwardBurst => forward(&mk, self.p, self.check, true),
        }
    }

    fn single<W: Worker>(&self, w: &mut W) -> f64 {
        match self.wl {
            Workload::Burst => burst(w, self.p.burst_rounds),
            Workload::Steady => steady(w, self.p),
            Workload::Forward | Workload::ForwardBurst => {
                unreachable!("forward takes two threads")
            }
        }
    }
}

/// CPU time consumed by the calling thread, in ns (`CLOCK_THREAD_CPUTIME_ID`). Samples are
/// timed with it rather than the wall clock: time the thread spends preempted by the other
/// processes of this shared 2-core machine is not counted.
fn cpu_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn ns_per(t0: u64, t1: u64, n: usize) -> f64 {
    t1.saturating_sub(t0) as f64 / n.max(1) as f64
}

/// Allocate `BURST`, write each, free them; `rounds` times after a warm-up tenth.
fn burst<W: Worker>(w: &mut W, rounds: usize) -> f64 {
    let mut v = Vec::with_capacity(BURST);
    for r in 0..rounds / 10 + 1 {
        w.alloc_n(&mut v, BURST, (r * BURST) as u64);
        w.free_all(&mut v);
    }
    let t0 = cpu_now();
    for r in 0..rounds {
        w.alloc_n(&mut v, BURST, (r * BURST) as u64);
        w.free_all(&mut v);
    }
    ns_per(t0, cpu_now(), rounds * BURST)
}

fn steady_steps<W: Worker>(w: &mut W, slots: &mut [Option<W::H>], idx: &[u32]) {
    for (k, &i) in idx.iter().enumerate() {
        let s = &mut slots[i as usize];
        if let Some(h) = s.take() {
            w.free(h);
        }
        *s = Some(w.alloc(k as u64));
    }
}

/// Keep `steady_live` objects; at each step free a random one and allocate its replacement.
fn steady<W: Worker>(w: &mut W, p: &Params) -> f64 {
    let live = p.steady_live;
    // Pre-warm: the working set once, freed.
    let mut slots: Vec<Option<W::H>> = (0..live).map(|i| Some(w.alloc(i as u64))).collect();
    for h in slots.iter_mut().filter_map(Option::take) {
        w.free(h);
    }
    for (i, s) in slots.iter_mut().enumerate() {
        *s = Some(w.alloc(i as u64));
    }
    steady_steps(w, &mut slots, &p.steady_idx[..p.steady_idx.len() / 10]);
    let t0 = cpu_now();
    steady_steps(w, &mut slots, &p.steady_idx);
    let t1 = cpu_now();
    for h in slots.iter_mut().filter_map(Option::take) {
        w.free(h);
    }
    ns_per(t0, t1, p.steady_idx.len())
}

/// Pins the calling thread to one CPU (best effort; no-op with fewer CPUs).
fn pin_to(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 {
        return;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Waits for the other side of the forward queue: a short spin, then sleeps, so that a
/// waiting thread burns little CPU time while the other is preempted.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 32 {
        std::hint::spin_loop();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// The queues between the forward threads: one handle per slot (`forward`), or bursts of up
/// to `BURST` handles in recycled vectors (`forward-burst`, with a return queue of empty
/// vectors so that the steady state allocates nothing).
struct Queues<H> {
    bursts: bool,
    one: ArrayQueue<H>,
    full: ArrayQueue<Vec<H>>,
    spare: ArrayQueue<Vec<H>>,
}

impl<H> Queues<H> {
    fn new(cap: usize, bursts: bool) -> Self {
        let nb = (cap / BURST).max(1);
        Queues {
            bursts,
            one: ArrayQueue::new(cap),
            full: ArrayQueue::new(nb),
            // Every vector in existence fits: those in `full`, plus one on each side.
            spare: ArrayQueue::new(nb + 2),
        }
    }
}

fn push_wait<X>(q: &ArrayQueue<X>, mut x: X) {
    let mut spins = 0;
    while let Err(back) = q.push(x) {
        x = back;
        backoff(&mut spins);
    }
}

fn producer<W: Worker>(w: &mut W, q: &Queues<W::H>, n: usize) {
    let mut burst = Vec::with_capacity(BURST);
    let mut sent = 0;
    while sent < n {
        let k = BURST.min(n - sent);
        if q.bursts {
            let mut v = q.spare.pop().unwrap_or_else(|| Vec::with_capacity(BURST));
            w.alloc_n(&mut v, k, sent as u64);
            push_wait(&q.full, v);
        } else {
            w.alloc_n(&mut burst, k, sent as u64);
            for h in burst.drain(..) {
                push_wait(&q.one, h);
            }
        }
        sent += k;
    }
}

fn consumer<W: Worker>(w: &mut W, q: &Queues<W::H>, n: usize) -> u64 {
    let mut got = Vec::with_capacity(BURST);
    let mut recv = 0;
    let mut sum = 0u64;
    let mut spins = 0;
    while recv < n {
        if q.bursts {
            if let Some(v) = q.full.pop() {
                let empty = std::mem::replace(&mut got, v);
                let _ = q.spare.push(empty);
            }
        } else {
            while got.len() < BURST {
                match q.one.pop() {
                    Some(h) => got.push(h),
                    None => break,
                }
            }
        }
        if got.is_empty() {
            backoff(&mut spins);
            continue;
        }
        spins = 0;
        for h in &got {
            sum = sum.wrapping_add(w.val(h));
        }
        recv += got.len();
        w.free_all(&mut got);
    }
    sum
}

/// Thread A allocates (in bursts where the API has them) and pushes each handle into a bounded
/// queue (or, with `bursts`, each burst of 32 handles); thread B pops up to a burst, reads each
/// object and frees them (through its own cache for idxpool). A warm-up run of a tenth precedes
/// the timed one. The figure is the CPU time of the busier thread per object: the pipeline's
/// time per object on two idle cores (waits spin briefly, then sleep, so that a thread
/// preempted by another process does not make the other one burn CPU time).
fn forward<W, F>(mk: &F, p: &Params, check: Option<&CheckLog>, bursts: bool) -> f64
where
    W: Worker,
    W::H: Send,
    F: Fn() -> W + Sync,
{
    let q: Queues<W::H> = Queues::new(p.queue_cap, bursts);
    let start = Barrier::new(2);
    let n = p.forward_total;
    let warm = n / 10 + 1;
    let side = |cpu: usize| {
        let (q, start) = (&q, &start);
        move || {
            pin_to(cpu);
            let mut w = mk();
            let go = |w: &mut dyn FnMut(usize)| {
                w(warm);
                start.wait();
                let t0 = cpu_now();
                w(n);
                cpu_now() - t0
            };
            let step = |w2: &mut W, k: usize| {
                if cpu == 0 {
                    producer(w2, q, k);
                } else {
                    black_box(consumer(w2, q, k));
                }
            };
            match check {
                Some(log) => {
                    let mut c = Checked { w: &mut w, log };
                    go(&mut |k| {
                        if cpu == 0 {
                            producer(&mut c, q, k);
                        } else {
                            black_box(consumer(&mut c, q, k));
                        }
                    })
                }
                None => go(&mut |k| step(&mut w, k)),
            }
        }
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(side(0));
        let b = s.spawn(side(1));
        (a.join().expect("producer"), b.join().expect("consumer"))
    });
    ns_per(0, a.max(b), n)
}

// ---- contenders -----------------------------------------------------------------------------

type RunFn = fn(&Job) -> f64;

/// A contender: its name, whether it can be shared between threads, how it is driven, and its
/// run function for each object size (in [`SIZES`] order).
struct Contender {
    name: &'static str,
    multi: bool,
    run: [RunFn; 3],
}

impl Contender {
    /// Whether this contender takes part in `wl`.
    fn supports(&self, wl: Workload) -> bool {
        match wl {
            Workload::Forward | Workload::ForwardBurst => self.multi,
            Workload::Steady => self.name != FLOOR,
            Workload::Burst => true,
        }
    }
}

/// The no-allocator floor (see [`Floor`]).
const FLOOR: &str = "floor-no-alloc";

/// The reference of every ratio.
const REFERENCE: &str = "idxpool-explicit";

/// Backings idxpool's benchmark pools got (printed once).
static BACKINGS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn note_backing(b: &idxpool::BackingReport) {
    if let Ok(mut s) = BACKINGS.lock() {
        s.insert(b.backing.to_string());
    }
}

fn idx_builder<'a, T: Obj>(job: &Job) -> PoolBuilder<'a, T> {
    PoolBuilder::<T>::with_default(job.p.pool_cap)
}

fn run_idx_explicit<T: Obj>(job: &Job) -> f64 {
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

fn run_idx_explicit_1<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped(|pool| {
            job.run(|| IdxCache {
                c: pool.local_cache(),
                bulk: false,
            })
        })
        .expect("idxpool pool")
}

fn run_idx_implicit<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped(|pool| job.run(|| IdxImplicit(&pool)))
        .expect("idxpool pool")
}

fn run_idx_ptr<T: Obj>(job: &Job) -> f64 {
    idx_builder::<T>(job)
        .scoped_ptr(|pool| {
            job.run(|| IdxCache {
                c: pool.local_cache(),
                bulk: true,
            })
        })
        .expect("idxpool pointer pool")
}

fn run_sharded<T: Obj>(job: &Job) -> f64 {
    let pool = sharded_slab::Pool::<T>::new();
    job.run(|| ShardedSlab(&pool))
}

fn run_lockfree<T: Obj>(job: &Job) -> f64 {
    let pool = lockfree_object_pool::LinearObjectPool::<T>::new(T::default, |_| ());
    job.run(|| LockfreePool(&pool))
}

fn run_heapless<T: Obj>(job: &Job) -> f64 {
    T::heapless_init();
    job.run(|| Heapless::<T>(PhantomData))
}

fn run_arrayqueue<T: Obj>(job: &Job) -> f64 {
    let fl = FreeList::<T>::new(job.p.pool_cap as usize);
    job.run(|| ArrayQueueFree(&fl))
}

fn run_floor<T: Obj>(job: &Job) -> f64 {
    let f = Floor::<T> {
        objs: (0..job.p.pool_cap)
            .map(|_| UnsafeCell::new(T::default()))
            .collect(),
    };
    job.run(|| FloorW { f: &f, next: 0 })
}

fn run_slotmap<T: Obj>(job: &Job) -> f64 {
    job.run(|| SlotMapW::<T>(slotmap::SlotMap::new()))
}

fn run_slab<T: Obj>(job: &Job) -> f64 {
    job.run(|| SlabW::<T>(slab::Slab::new()))
}

fn run_system<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(System, PhantomData))
}

fn run_mimalloc<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(mimalloc::MiMalloc, PhantomData))
}

fn run_jemalloc<T: Obj>(job: &Job) -> f64 {
    job.run(|| RawAlloc::<_, T>(tikv_jemallocator::Jemalloc, PhantomData))
}

macro_rules! per_size {
    ($f:ident) => {
        [$f::<O8> as RunFn, $f::<O64> as RunFn, $f::<O2K> as RunFn]
    };
}

fn contenders() -> Vec<Contender> {
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
fn is_peer(name: &str) -> bool {
    !name.starts_with("idxpool") && name != FLOOR
}

// ---- statistics and output ------------------------------------------------------------------

/// Median of `v` (mean of the two middle values for an even count); NaN when empty.
fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// `x / reference`: above 1 when the reference is faster. NaN when either is missing.
fn ratio(x: f64, reference: f64) -> f64 {
    if reference > 0.0 && x.is_finite() && reference.is_finite() {
        x / reference
    } else {
        f64::NAN
    }
}

/// Half the relative spread `(max - min) / 2 / median`, in percent.
fn spread_pct(v: &[f64]) -> f64 {
    let m = median(v);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (hi - lo) / 2.0 / m * 100.0
}

/// One measured figure.
#[derive(Clone, Debug)]
struct Row {
    workload: String,
    contender: String,
    object_size: usize,
    threads: usize,
    ns: f64,
    spread: f64,
}

const CSV_HEADER: &str = "workload,contender,object_size,threads,ns_per_object";

fn csv_string(rows: &[Row]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.3}",
            r.workload, r.contender, r.object_size, r.threads, r.ns
        );
    }
    s
}

/// Whether (workload, contender) passes the filter terms (empty: everything). A term matches
/// when it is a substring of the workload or of the contender name; a term `W:C` matches when
/// `W` is a substring of the workload and `C` of the contender.
fn matches(terms: &[String], workload: &str, contender: &str) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| match t.split_once(':') {
            Some((w, c)) => workload.contains(w) && contender.contains(c),
            None => workload.contains(t.as_str()) || contender.contains(t.as_str()),
        })
}

fn fmt_ns(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn fmt_ratio(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}x")
    }
}

/// Prints the table of one workload: ns per object (± half spread) and ratio to the
/// reference, per object size.
fn print_table(title: &str, rows: &[Row], reference: &str, ratio_note: &str) {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.contender.as_str()) {
            names.push(&r.contender);
        }
    }
    let sizes: Vec<usize> = SIZES
        .iter()
        .copied()
        .filter(|s| rows.iter().any(|r| r.object_size == *s))
        .collect();
    println!("\n### {title}\n");
    print!("| contender |");
    for s in &sizes {
        print!(" {} ns/obj | ratio |", size_label(*s));
    }
    println!();
    print!("|---|");
    for _ in &sizes {
        print!("---:|---:|");
    }
    println!();
    for n in &names {
        print!("| {n} |");
        for s in &sizes {
            let get = |c: &str| {
                rows.iter()
                    .find(|r| r.contender == c && r.object_size == *s)
                    .map(|r| (r.ns, r.spread))
            };
            match get(n) {
                Some((ns, sp)) => {
                    let refv = get(reference).map_or(f64::NAN, |x| x.0);
                    let rt = if ratio_note.starts_with("speedup") {
                        ratio(refv, ns)
                    } else {
                        ratio(ns, refv)
                    };
                    print!(" {} ±{:.0}% | {} |", fmt_ns(ns), sp, fmt_ratio(rt));
                }
                None => print!(" - | - |"),
            }
        }
        println!();
    }
    println!("\n{ratio_note}");
}

// ---- scan -----------------------------------------------------------------------------------

idxpool::brand!(ScanHuge);
idxpool::brand!(ScanThp);
idxpool::brand!(Scan4K);

/// Mapping facts from /proc/self/smaps for the mapping holding `addr`:
/// (size kB, AnonHugePages kB, KernelPageSize kB).
fn smaps_for(addr: usize) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut found = false;
    let (mut size, mut anon_huge, mut kps) = (0, 0, 0);
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                if found {
                    break;
                }
                found = (lo..hi).contains(&addr);
                continue;
            }
        }
        if found {
            let mut it = line.split_whitespace();
            let key = it.next().unwrap_or("");
            let val: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            match key {
                "Size:" => size = val,
                "AnonHugePages:" => anon_huge = val,
                "KernelPageSize:" => kps = val,
                _ => {}
            }
        }
    }
    found.then_some((size, anon_huge, kps))
}

/// One scan contender: an idxpool pool whose every object is held, in a random order.
trait ScanRun {
    fn name(&self) -> &'static str;
    /// Touches every object once (read-modify-write of its u64); ns per object.
    fn pass(&mut self) -> f64;
    fn detail(&self) -> String;
    /// Sum of the objects' u64 (tests).
    #[cfg(test)]
    fn sum(&self) -> u64;
}

struct ScanPool<T: Obj, B: NamedBrand> {
    name: &'static str,
    pool: idxpool::Pool<T, B>,
    hs: Vec<idxpool::Handle<T, B>>,
}

impl<T: Obj, B: NamedBrand> ScanPool<T, B> {
    fn new(name: &'static str, backing: Backing, bytes: usize) -> Result<Self, PoolError> {
        let stride = idxpool::StrideMode::Auto.stride_for(std::mem::size_of::<T>(), 8)?;
        let cap = (bytes / stride) as u32;
        let pool = PoolBuilder::<T>::with_default(cap)
            .backing(BackingPolicy::Require(backing))
            .prefault(true)
            .cache_size(0)
            .name(name)
            .build::<B>()?;
        let mut hs = Vec::with_capacity(cap as usize);
        pool.get_bulk(&mut hs, cap as usize)?;
        hs.shuffle(&mut SmallRng::seed_from_u64(0x5ca9));
        Ok(ScanPool { name, pool, hs })
    }
}

impl<T: Obj, B: NamedBrand> ScanRun for ScanPool<T, B> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn pass(&mut self) -> f64 {
        let pool = &self.pool;
        let t0 = cpu_now();
        for h in self.hs.iter_mut() {
            let o = pool.get_mut(h);
            o.set(o.val().wrapping_add(1));
        }
        ns_per(t0, cpu_now(), self.hs.len())
    }
    fn detail(&self) -> String {
        let b = self.pool.backing();
        let mut s = format!(
            "{} objects x stride {} B, {}",
            self.pool.capacity(),
            self.pool.stride(),
            b
        );
        if let Some((size, huge, kps)) = smaps_for(self.pool.base().as_ptr() as usize) {
            let _ = write!(
                s,
                "; smaps: {size} kB, KernelPageSize {kps} kB, AnonHugePages {huge} kB"
            );
        }
        s
    }
    #[cfg(test)]
    fn sum(&self) -> u64 {
        self.hs.iter().map(|h| self.pool.get_ref(h).val()).sum()
    }
}

impl<T: Obj, B: NamedBrand> Drop for ScanPool<T, B> {
    fn drop(&mut self) {
        self.pool.put_bulk(&mut self.hs);
    }
}

/// Free 2 MiB hugetlb pages (the per-size sysfs counter, right whatever the default size).
fn hugepages_free() -> String {
    idxpool::region::free_hugepages_2m().map_or_else(|| "?".into(), |n| n.to_string())
}

/// Builds the three scan pools of `T` over `bytes`; skipped ones come back as (name, reason).
/// Scan contenders built, and (name, reason) of those skipped.
type ScanSet = (Vec<Box<dyn ScanRun>>, Vec<(String, String)>);

fn scan_pools<T: Obj>(bytes: usize) -> ScanSet {
    let mut runs: Vec<Box<dyn ScanRun>> = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |r: Result<Box<dyn ScanRun>, String>, name: &str| match r {
        Ok(p) => runs.push(p),
        Err(e) => skipped.push((name.to_string(), e)),
    };
    let free_before = hugepages_free();
    add(
        ScanPool::<T, ScanHuge>::new("idxpool-hugetlb2m", Backing::Hugetlb2M, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| {
                format!(
                    "{e} (free 2 MiB hugepages were {free_before}; needs {} 2 MiB pages: \
                     echo 600 > /proc/sys/vm/nr_hugepages as root)",
                    bytes.div_ceil(2 << 20)
                )
            }),
        "idxpool-hugetlb2m",
    );
    add(
        ScanPool::<T, ScanThp>::new("idxpool-thp", Backing::Thp, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| e.to_string()),
        "idxpool-thp",
    );
    add(
        ScanPool::<T, Scan4K>::new("idxpool-4k", Backing::Pages4K, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| e.to_string()),
        "idxpool-4k",
    );
    (runs, skipped)
}

/// Runs scan for `T`: one untimed pass each, then `reps` round-robin rounds.
fn scan_size<T: Obj>(bytes: usize, reps: usize, terms: &[String], rows: &mut Vec<Row>) {
    let t = Instant::now();
    let (mut runs, skipped) = scan_pools::<T>(bytes);
    runs.retain(|r| matches(terms, "scan", r.name()));
    println!(
        "  scan {}: pools of {} MiB built and shuffled in {:.1} s",
        T::LABEL,
        bytes >> 20,
        t.elapsed().as_secs_f64()
    );
    for r in &runs {
        println!("    {}: {}", r.name(), r.detail());
    }
    for (n, why) in &skipped {
        println!("    {n}: SKIPPED: {why}");
    }
    for r in runs.iter_mut() {
        r.pass();
    }
    let mut samples = vec![Vec::new(); runs.len()];
    for rep in 0..reps {
        for j in 0..runs.len() {
            let k = (j + rep) % runs.len();
            samples[k].push(runs[k].pass());
        }
    }
    for (r, s) in runs.iter().zip(&samples) {
        rows.push(Row {
            workload: "scan".into(),
            contender: r.name().into(),
            object_size: std::mem::size_of::<T>(),
            threads: 1,
            ns: median(s),
            spread: spread_pct(s),
        });
    }
}

// ---- memory ---------------------------------------------------------------------------------

/// Live objects at which per-object overhead is measured.
const MEM_LIVE: usize = 4096;

/// (contender, handle bytes, overhead bytes per live object, per-thread cache bytes or note,
/// derivation) for one object type.
type MemLine = (String, usize, f64, String, String);

// The allocators' usable size, for the per-object overhead of `box-*`.
extern "C" {
    fn mi_usable_size(p: *const std::ffi::c_void) -> usize;
}

fn on_fresh_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| s.spawn(f).join().expect("thread"))
}

/// Memory line of an idxpool pool of `MEM_LIVE` objects on 4 KiB pages whose construction
/// requested `heap` bytes from the global allocator.
fn idx_line<T: Obj, B: Brand, R: Repr>(
    name: &str,
    pool: GenericPool<T, B, R>,
    heap: isize,
    out: &mut Vec<MemLine>,
) {
    let live = pool.capacity();
    let entry = std::mem::size_of::<R::Entry>();
    let (c, cache) = counted(|| pool.local_cache());
    drop(c);
    let implicit = on_fresh_thread(|| {
        counted(|| {
            let h = pool.get().expect("object");
            pool.put(h);
        })
        .1
    });
    let h = pool.get().expect("object");
    let hsize = std::mem::size_of_val(&h);
    pool.put(h);
    let size = std::mem::size_of::<T>();
    let slots = idxpool::ring::Ring::<u32>::slot_count(
        live,
        idxpool::ring::RingFlags {
            exact_size: true,
            ..Default::default()
        },
    )
    .unwrap_or(0);
    let mapped = pool.backing().mapped_bytes;
    let stride = pool.stride();
    let computed = (stride - size) as f64 + (slots * entry) as f64 / live as f64;
    out.push((
        name.to_string(),
        hsize,
        computed,
        format!("{cache} (explicit), {implicit} (implicit, 1st use by a thread)"),
        format!(
            "data structures: stride {stride} - size {size} + ring {slots} slots x {entry} B \
             / {live} objects = {computed:.1} B; cross-check, measured: region {mapped} B mapped \
             on 4 KiB pages + {heap} B heap (ring, {} thread slots, registry) = {:.1} B/object \
             over the object size; cache = 2 x cache size 512 x {entry} B entries + header",
            idxpool::DEFAULT_MAX_THREADS,
            (mapped as f64 + heap as f64) / live as f64 - size as f64,
        ),
    ));
}

fn idx_memory<T: Obj>(out: &mut Vec<MemLine>) {
    idxpool::brand!(MemIdx);
    idxpool::brand!(MemPtr);
    let b = || {
        PoolBuilder::<T>::with_default(MEM_LIVE as u32)
            .backing(BackingPolicy::Require(Backing::Pages4K))
            .cache_size(512)
    };
    let (pool, heap) = counted(|| b().build::<MemIdx>().expect("pool"));
    idx_line("idxpool (index)", pool, heap, out);
    let (pool, heap) = counted(|| b().build_ptr::<MemPtr>().expect("pool"));
    idx_line("idxpool-ptr", pool, heap, out);
}

fn peers_memory<T: Obj>(out: &mut Vec<MemLine>) {
    let size = std::mem::size_of::<T>() as f64;
    let per = |bytes: isize| bytes as f64 / MEM_LIVE as f64 - size;
    // sharded-slab
    {
        let mut keys = Vec::with_capacity(MEM_LIVE);
        let (pool, bytes) = counted(|| {
            let pool = sharded_slab::Pool::<T>::new();
            for i in 0..MEM_LIVE {
                keys.push(pool.create_with(|o| o.set(i as u64)).expect("slot"));
            }
            pool
        });
        let thread = on_fresh_thread(|| {
            counted(|| {
                let k = pool.create_with(|o| o.set(1)).expect("slot");
                pool.clear(k);
            })
            .1
        });
        for k in keys {
            pool.clear(k);
        }
        out.push((
            "sharded-slab".into(),
            std::mem::size_of::<usize>(),
            per(bytes),
            format!("{thread} (shard + first page, 1st use by a thread)"),
            format!("measured: {bytes} B heap for Pool::new + {MEM_LIVE} live (pages double: 32, 64, ..)"),
        ));
    }
    // lockfree-object-pool
    {
        let pool = lockfree_object_pool::LinearObjectPool::<T>::new(T::default, |_| ());
        let mut guards = Vec::with_capacity(MEM_LIVE);
        let ((), heap) = counted(|| {
            for _ in 0..MEM_LIVE {
                guards.push(pool.pull());
            }
        });
        // The first page of 32 objects lives inside the pool value itself.
        let bytes = heap + std::mem::size_of_val(&pool) as isize;
        let hsize = std::mem::size_of_val(&guards[0]);
        drop(guards);
        out.push((
            "lockfree-object-pool".into(),
            hsize,
            per(bytes),
            "0 (no per-thread state)".into(),
            format!(
                "measured: {heap} B heap for {MEM_LIVE} pulls + {} B pool value holding the \
                 first page (linked pages of 32 objects + free mask + next pointer)",
                std::mem::size_of_val(&pool)
            ),
        ));
    }
    // heapless
    {
        let block = std::mem::size_of::<BoxBlock<T>>();
        out.push((
            "heapless-pool".into(),
            std::mem::size_of::<heapless::pool::boxed::Box<T::Hp>>(),
            block as f64 - size,
            "0 (no per-thread state)".into(),
            format!("data structures: size_of BoxBlock<T> = {block} B (16-byte tagged next pointer + object, align 16)"),
        ));
    }
    // crossbeam ArrayQueue free list
    {
        let (fl, bytes) = counted(|| FreeList::<T>::new(MEM_LIVE));
        drop(fl);
        out.push((
            "crossbeam-arrayqueue".into(),
            std::mem::size_of::<u32>(),
            per(bytes),
            "0 (no per-thread state)".into(),
            format!("measured: {bytes} B heap for Vec<T> of {MEM_LIVE} + ArrayQueue<u32> (slot = stamp + index)"),
        ));
    }
    // slotmap, slab
    {
        let mut keys = Vec::with_capacity(MEM_LIVE);
        let (m, bytes) = counted(|| {
            let mut m = slotmap::SlotMap::<slotmap::DefaultKey, T>::new();
            for i in 0..MEM_LIVE {
                keys.push(m.insert(T::with(i as u64)));
            }
            m
        });
        out.push((
            "slotmap".into(),
            std::mem::size_of::<slotmap::DefaultKey>(),
            per(bytes),
            "n/a (single thread)".into(),
            format!(
                "measured: {bytes} B heap after {MEM_LIVE} inserts (Vec growth, capacity {})",
                m.capacity()
            ),
        ));
        let (s, bytes) = counted(|| {
            let mut s = slab::Slab::<T>::new();
            for i in 0..MEM_LIVE {
                s.insert(T::with(i as u64));
            }
            s
        });
        out.push((
            "slab".into(),
            std::mem::size_of::<usize>(),
            per(bytes),
            "n/a (single thread)".into(),
            format!(
                "measured: {bytes} B heap after {MEM_LIVE} inserts (Vec growth, capacity {})",
                s.capacity()
            ),
        ));
    }
    // allocators: usable size of one allocation
    {
        let l = Layout::new::<T>();
        // SAFETY: each pointer is allocated and freed by the same allocator with layout l, and
        // the usable-size queries run while it is live.
        let (sys, mi, je) = unsafe {
            let p = System.alloc(l);
            let sys = libc::malloc_usable_size(p.cast());
            System.dealloc(p, l);
            let p = mimalloc::MiMalloc.alloc(l);
            let mi = mi_usable_size(p.cast());
            mimalloc::MiMalloc.dealloc(p, l);
            let p = tikv_jemallocator::Jemalloc.alloc(l);
            let je = tikv_jemallocator::usable_size(p);
            tikv_jemallocator::Jemalloc.dealloc(p, l);
            (sys, mi, je)
        };
        let not = "allocator-internal, not counted".to_string();
        out.push((
            "box-system".into(),
            8,
            (sys + 8) as f64 - size,
            not.clone(),
            format!("glibc: malloc_usable_size {sys} B + 8 B chunk header"),
        ));
        out.push((
            "box-mimalloc".into(),
            8,
            mi as f64 - size,
            not.clone(),
            format!("mi_usable_size {mi} B (size class; page metadata not counted)"),
        ));
        out.push((
            "box-jemalloc".into(),
            8,
            je as f64 - size,
            not,
            format!("usable_size {je} B (size class; extent metadata not counted)"),
        ));
    }
}

fn memory_report() {
    let mut per_size: Vec<Vec<MemLine>> = Vec::new();
    for size in SIZES {
        let mut v = Vec::new();
        match size {
            8 => {
                idx_memory::<O8>(&mut v);
                peers_memory::<O8>(&mut v);
            }
            64 => {
                idx_memory::<O64>(&mut v);
                peers_memory::<O64>(&mut v);
            }
            _ => {
                idx_memory::<O2K>(&mut v);
                peers_memory::<O2K>(&mut v);
            }
        }
        per_size.push(v);
    }
    println!("\n### memory (at {MEM_LIVE} live objects)\n");
    println!("| contender | handle B | overhead B/obj 8 B | 64 B | 2 KiB | per-thread cache B (64 B objects) |");
    println!("|---|---:|---:|---:|---:|---|");
    for (i, l) in per_size[0].iter().enumerate() {
        print!("| {} | {} |", l.0, l.1);
        for v in &per_size {
            print!(" {:.1} |", v[i].2);
        }
        println!(" {} |", per_size[1][i].3);
    }
    println!("\nHow each figure was derived (64 B objects):");
    for l in &per_size[1] {
        println!("- {}: {}", l.0, l.4);
    }
    println!(
        "- overhead = bytes the structure uses for {MEM_LIVE} live objects / {MEM_LIVE} - size_of::<T>(); \
         heap bytes are the sizes requested from the global allocator (a counting wrapper of \
         System), not malloc's own headers. idxpool on hugetlb/THP rounds the region up to 2 MiB."
    );
}

// ---- SVG ------------------------------------------------------------------------------------

fn write_svg(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let panel_h = |w: &str| {
        let n = rows
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| r.contender.as_str())
            .collect::<BTreeSet<_>>()
            .len();
        (80 + n * 42) as u32
    };
    let total: u32 = workloads.iter().map(|w| panel_h(w)).sum();
    let root = SVGBackend::new(path, (1000, total.max(100))).into_drawing_area();
    root.fill(&WHITE)?;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];
    let mut breaks = Vec::new();
    let mut y_off = 0u32;
    for w in &workloads {
        y_off += panel_h(w);
        breaks.push(y_off);
    }
    breaks.pop();
    let areas = root.split_by_breakpoints([] as [u32; 0], breaks);
    for (w, area) in workloads.iter().zip(areas) {
        let wr: Vec<&Row> = rows.iter().filter(|r| r.workload == *w).collect();
        let mut names: Vec<&str> = Vec::new();
        for r in &wr {
            if !names.contains(&r.contender.as_str()) {
                names.push(&r.contender);
            }
        }
        let finite = wr
            .iter()
            .map(|r| r.ns)
            .filter(|x| x.is_finite() && *x > 0.0);
        let lo = finite.clone().fold(f64::INFINITY, f64::min) / 1.5;
        let hi = finite.fold(0.0, f64::max) * 1.5;
        if !(lo.is_finite() && hi > lo) {
            continue;
        }
        let n = names.len() as f64;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("{w}: ns per object (log scale, lower is better)"),
                ("sans-serif", 18),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(190)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..n)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(8)
            .x_label_formatter(&|v| format!("{v}"))
            .x_desc("ns per object")
            .draw()?;
        for (k, size) in SIZES.iter().enumerate() {
            let color = colors[k];
            let bars: Vec<_> = names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| {
                    wr.iter()
                        .find(|r| r.contender == *name && r.object_size == *size)
                        .filter(|r| r.ns.is_finite())
                        .map(|r| {
                            let y0 = (names.len() - 1 - i) as f64 + 0.1 + k as f64 * 0.27;
                            Rectangle::new([(lo, y0), (r.ns, y0 + 0.25)], color.filled())
                        })
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            chart
                .draw_series(bars)?
                .label(size_label(*size))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        for (i, name) in names.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(lo, (names.len() - 1 - i) as f64 + 0.5));
            root.draw(&Text::new(
                name.to_string(),
                (px - 185, py - 7),
                ("sans-serif", 14).into_font(),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

// ---- main -----------------------------------------------------------------------------------

/// idxpool versus sharded-slab, lockfree-object-pool, heapless, crossbeam ArrayQueue,
/// slotmap, slab and Box from System / mimalloc / jemalloc: interleaved, median of reps.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Small sizes and 3 repetitions (under a minute in release); scan pools of 256 MiB.
    #[arg(long)]
    quick: bool,
    /// Write `workload,contender,object_size,threads,ns_per_object` here, and a bar chart
    /// next to it with the .svg extension.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Only contenders or workloads whose name contains one of these comma-separated
    /// substrings; `W:C` selects contenders matching C in workloads matching W
    /// (idxpool-explicit always runs as the reference; `memory` selects the memory report).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Repetitions per (workload, size, contender); default 3 with --quick, else 7.
    #[arg(long)]
    reps: Option<usize>,
}

fn main() {
    let args = Args::parse();
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 7 }).max(1);
    let terms = &args.filter;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!(
        "# peers: idxpool vs the crates users pick instead ({} mode, {reps} reps, median; CPU: {cpu}, {} CPUs)",
        if args.quick { "quick" } else { "default" },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let started = Instant::now();
    let params = Params::new(args.quick);
    let all = contenders();
    let mut rows: Vec<Row> = Vec::new();
    for wl in Workload::ALL {
        let cs: Vec<&Contender> = all
            .iter()
            .filter(|c| c.supports(wl))
            .filter(|c| c.name == REFERENCE || matches(terms, wl.name(), c.name))
            .collect();
        if cs.len() <= 1 && !matches(terms, wl.name(), REFERENCE) {
            continue;
        }
        let t = Instant::now();
        for (si, size) in SIZES.iter().enumerate() {
            let job = Job {
                wl,
                p: &params,
                check: None,
            };
            let mut samples = vec![Vec::new(); cs.len()];
            for rep in 0..reps {
                for j in 0..cs.len() {
                    let k = (j + rep) % cs.len();
                    samples[k].push((cs[k].run[si])(&job));
                }
            }
            for (c, s) in cs.iter().zip(&samples) {
                rows.push(Row {
                    workload: wl.name().into(),
                    contender: c.name.into(),
                    object_size: *size,
                    threads: wl.threads(),
                    ns: median(s),
                    spread: spread_pct(s),
                });
            }
        }
        let wr: Vec<Row> = rows
            .iter()
            .filter(|r| r.workload == wl.name())
            .cloned()
            .collect();
        print_table(
            &format!(
                "{} ({} thread{}, {:.1} s)",
                wl.name(),
                wl.threads(),
                if wl.threads() > 1 { "s" } else { "" },
                t.elapsed().as_secs_f64()
            ),
            &wr,
            REFERENCE,
            "ns = CPU time of the timed thread(s) per object (CLOCK_THREAD_CPUTIME_ID; forward*: \
             the busier of the two threads), median of the repetitions; ± = half the min-max spread. \
             ratio = contender ns / idxpool-explicit ns (above 1: idxpool-explicit is faster).",
        );
    }
    if let Ok(b) = BACKINGS.lock() {
        if !b.is_empty() {
            println!(
                "\nidxpool benchmark pools ({} objects, BackingPolicy::Auto) were backed by: {}",
                params.pool_cap,
                b.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    // scan
    if ["idxpool-hugetlb2m", "idxpool-thp", "idxpool-4k"]
        .iter()
        .any(|c| matches(terms, "scan", c))
    {
        let bytes = if args.quick { 256 << 20 } else { 1 << 30 };
        println!(
            "\n## scan: every object of a {} MiB pool touched in a random order{}",
            bytes >> 20,
            if args.quick {
                " (--quick: 256 MiB instead of 1 GiB)"
            } else {
                ""
            }
        );
        let t = Instant::now();
        let mut srows = Vec::new();
        println!(
            "  scan 8 B: not run: {} M objects would need a {} MiB shuffled handle array per \
             pool and seconds per pass, and each touch hits a random page just as at 64 B",
            (bytes / 8) >> 20,
            (bytes / 8 * 4) >> 20
        );
        scan_size::<O64>(bytes, reps, terms, &mut srows);
        scan_size::<O2K>(bytes, reps, terms, &mut srows);
        print_table(
            &format!("scan (1 thread, {:.1} s)", t.elapsed().as_secs_f64()),
            &srows,
            "idxpool-4k",
            "speedup = idxpool-4k ns / this ns (above 1: faster than 4 KiB pages).",
        );
        rows.extend(srows);
    }
    if terms.is_empty() || terms.iter().any(|t| "memory".contains(t.as_str())) {
        memory_report();
    }
    // targets
    println!("\n### targets (measured, not asserted)\n");
    for wl in ["burst", "forward", "forward-burst"] {
        for size in SIZES {
            let of = |pred: &dyn Fn(&str) -> bool| {
                rows.iter()
                    .filter(|r| r.workload == wl && r.object_size == size && pred(&r.contender))
                    .min_by(|a, b| a.ns.total_cmp(&b.ns))
            };
            let idx = of(&|c| c == REFERENCE);
            let peer = of(&|c| is_peer(c));
            if let (Some(i), Some(p)) = (idx, peer) {
                let x = p.ns / i.ns;
                println!(
                    "- {wl} {}: best peer {} {} ns vs idxpool-explicit {} ns: {:.2}x (target >= 3x: {})",
                    size_label(size),
                    p.contender,
                    fmt_ns(p.ns),
                    fmt_ns(i.ns),
                    x,
                    if x >= 3.0 { "met" } else { "NOT met" }
                );
            }
        }
    }
    for size in SIZES {
        let get = |c: &str| {
            rows.iter()
                .find(|r| r.workload == "scan" && r.contender == c && r.object_size == size)
        };
        if let (Some(h), Some(p)) = (get("idxpool-hugetlb2m"), get("idxpool-4k")) {
            let x = p.ns / h.ns;
            println!(
                "- scan {}: hugetlb {} ns vs 4 KiB {} ns: {:.2}x (target >= 1.3x: {})",
                size_label(size),
                fmt_ns(h.ns),
                fmt_ns(p.ns),
                x,
                if x >= 1.3 { "met" } else { "NOT met" }
            );
        }
    }
    if let Some(path) = &args.csv {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).expect("create the csv directory");
        }
        std::fs::write(path, csv_string(&rows)).expect("write csv");
        let svg = path.with_extension("svg");
        match write_svg(&svg, &rows) {
            Ok(()) => println!("\nwrote {} and {}", path.display(), svg.display()),
            Err(e) => println!("\nwrote {}; svg failed: {e}", path.display()),
        }
    }
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
}

// ---- tests ----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn tiny() -> Params {
        Params::sized(20, 64, 400, 3000, 64, 2048)
    }

    /// Every contender, every workload it supports, through the checker: distinct live
    /// objects, values intact, frees == allocs, nothing left live.
    fn all_contenders_at(si: usize) {
        let p = tiny();
        for c in contenders() {
            for wl in Workload::ALL {
                if !c.supports(wl) {
                    continue;
                }
                let log = CheckLog::default();
                let job = Job {
                    wl,
                    p: &p,
                    check: Some(&log),
                };
                let ns = (c.run[si])(&job);
                let (a, f) = (
                    log.allocs.load(Ordering::Relaxed),
                    log.frees.load(Ordering::Relaxed),
                );
                let what = format!("{} {} {}", c.name, wl.name(), SIZES[si]);
                assert!(ns.is_finite() && ns >= 0.0, "{what}: {ns}");
                assert!(a > 0, "{what}: nothing allocated");
                assert_eq!(a, f, "{what}: allocs != frees");
                assert!(
                    log.live.lock().unwrap().is_empty(),
                    "{what}: objects left live"
                );
                let expect = match wl {
                    Workload::Burst => (p.burst_rounds + p.burst_rounds / 10 + 1) * BURST,
                    Workload::Steady => {
                        2 * p.steady_live + p.steady_idx.len() + p.steady_idx.len() / 10
                    }
                    Workload::Forward | Workload::ForwardBurst => {
                        p.forward_total + p.forward_total / 10 + 1
                    }
                };
                assert_eq!(a, expect, "{what}: allocation count");
            }
        }
    }

    #[test]
    fn contenders_8b() {
        all_contenders_at(0);
    }

    #[test]
    fn contenders_64b() {
        all_contenders_at(1);
    }

    #[test]
    fn contenders_2k() {
        all_contenders_at(2);
    }

    /// A burst of every adapter directly: distinct addresses, as many frees as allocations.
    #[test]
    fn burst_adapters_hand_out_distinct_objects() {
        fn check<W: Worker>(w: &mut W) {
            let log = CheckLog::default();
            let mut c = Checked { w, log: &log };
            let mut v = Vec::new();
            c.alloc_n(&mut v, 40, 100);
            let one = c.alloc(7);
            let addrs: HashSet<usize> = v.iter().chain([&one]).map(|h| c.id(h)).collect();
            assert_eq!(addrs.len(), 41);
            c.free(one);
            c.free_all(&mut v);
            assert_eq!(log.allocs.load(Ordering::Relaxed), 41);
            assert_eq!(log.frees.load(Ordering::Relaxed), 41);
        }
        PoolBuilder::<O64>::with_default(256)
            .scoped(|pool| {
                check(&mut IdxCache {
                    c: pool.local_cache(),
                    bulk: true,
                });
                check(&mut IdxImplicit(&pool));
                pool.flush();
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
        let sp = sharded_slab::Pool::<O64>::new();
        check(&mut ShardedSlab(&sp));
        let lf = lockfree_object_pool::LinearObjectPool::<O64>::new(O64::default, |_| ());
        check(&mut LockfreePool(&lf));
        O64::heapless_init();
        check(&mut Heapless::<O64>(PhantomData));
        let fl = FreeList::<O64>::new(64);
        check(&mut ArrayQueueFree(&fl));
        assert_eq!(fl.free.len(), 64);
        let mut sm = SlotMapW::<O64>(slotmap::SlotMap::new());
        check(&mut sm);
        assert!(sm.0.is_empty());
        let mut sl = SlabW::<O64>(slab::Slab::new());
        check(&mut sl);
        assert!(sl.0.is_empty());
        check(&mut RawAlloc::<_, O64>(System, PhantomData));
        check(&mut RawAlloc::<_, O64>(mimalloc::MiMalloc, PhantomData));
        check(&mut RawAlloc::<_, O64>(
            tikv_jemallocator::Jemalloc,
            PhantomData,
        ));
    }

    #[test]
    fn median_and_ratio() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert_eq!(ratio(30.0, 10.0), 3.0);
        assert!(ratio(1.0, 0.0).is_nan());
        assert!(ratio(f64::NAN, 1.0).is_nan());
        assert_eq!(spread_pct(&[9.0, 10.0, 11.0]), 10.0);
    }

    #[test]
    fn csv_has_the_exact_header() {
        let rows = [Row {
            workload: "burst".into(),
            contender: "slab".into(),
            object_size: 64,
            threads: 1,
            ns: 1.5,
            spread: 0.0,
        }];
        let s = csv_string(&rows);
        let mut lines = s.lines();
        assert_eq!(
            lines.next(),
            Some("workload,contender,object_size,threads,ns_per_object")
        );
        assert_eq!(lines.next(), Some("burst,slab,64,1,1.500"));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn filter_matches_workload_or_contender() {
        let t = vec!["forward".to_string(), "jemalloc".to_string()];
        assert!(matches(&t, "forward", "slab"));
        assert!(matches(&t, "burst", "box-jemalloc"));
        assert!(!matches(&t, "burst", "slab"));
        assert!(matches(&[], "burst", "slab"));
        let t = vec!["steady:slab".to_string()];
        assert!(matches(&t, "steady", "slab"));
        assert!(!matches(&t, "burst", "slab"));
        assert!(!matches(&t, "steady", "slotmap"));
    }

    idxpool::brand!(TestScan);

    #[test]
    fn scan_touches_every_object_once() {
        let mut p = ScanPool::<O64, TestScan>::new("t", Backing::Pages4K, 1 << 20).unwrap();
        assert_eq!(p.hs.len(), (1 << 20) / 64);
        let mut idx: Vec<u32> = p.hs.iter().map(|h| h.index()).collect();
        assert_ne!(idx, (0..idx.len() as u32).collect::<Vec<_>>(), "shuffled");
        idx.sort_unstable();
        assert_eq!(
            idx,
            (0..idx.len() as u32).collect::<Vec<_>>(),
            "a permutation"
        );
        p.pass();
        p.pass();
        assert_eq!(p.sum(), 2 * p.hs.len() as u64);
        assert!(p.detail().contains("4 KiB"));
    }

    #[test]
    fn svg_is_written() {
        let rows: Vec<Row> = ["burst", "scan"]
            .iter()
            .flat_map(|w| {
                SIZES.iter().map(move |s| Row {
                    workload: w.to_string(),
                    contender: "idxpool-explicit".into(),
                    object_size: *s,
                    threads: 1,
                    ns: *s as f64,
                    spread: 0.0,
                })
            })
            .collect();
        let path = std::env::temp_dir().join(format!("peers-test-{}.svg", std::process::id()));
        write_svg(&path, &rows).unwrap();
        let s = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(s.contains("<svg") && s.contains("idxpool-explicit"));
    }
}
