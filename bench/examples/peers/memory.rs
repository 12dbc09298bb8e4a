//! The memory report: bytes per live object of each contender, and the heap accounting
//! (a counting global allocator) it relies on.

#[allow(unused_imports)]
use super::*;

// ---- heap accounting ------------------------------------------------------------------------

/// The global allocator: `System`, plus a per-thread byte count that is only kept while a
/// memory measurement runs on that thread (one TLS read per call otherwise). The timed paths of
/// the contenders do not allocate through it (pools are pre-warmed; the three `box-*`
/// contenders call their allocators directly).
pub(crate) struct CountingAlloc;

thread_local! {
    static COUNT_ON: Cell<bool> = const { Cell::new(false) };
    static COUNTED: Cell<isize> = const { Cell::new(0) };
}

pub(crate) fn count(delta: isize) {
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
pub(crate) static GLOBAL: CountingAlloc = CountingAlloc;

/// Runs `f` and returns its result with the net bytes it requested from the global allocator
/// on this thread (requested sizes, not malloc's own headers).
pub(crate) fn counted<R>(f: impl FnOnce() -> R) -> (R, isize) {
    COUNTED.with(|c| c.set(0));
    COUNT_ON.with(|c| c.set(true));
    let r = f();
    COUNT_ON.with(|c| c.set(false));
    (r, COUNTED.with(|c| c.get()))
}

// ---- memory ---------------------------------------------------------------------------------

/// Live objects at which per-object overhead is measured.
pub(crate) const MEM_LIVE: usize = 4096;

/// (contender, handle bytes, overhead bytes per live object, per-thread cache bytes or note,
/// derivation) for one object type.
pub(crate) type MemLine = (String, usize, f64, String, String);

// The allocators' usable size, for the per-object overhead of `box-*`.
extern "C" {
    fn mi_usable_size(p: *const std::ffi::c_void) -> usize;
}

pub(crate) fn on_fresh_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| s.spawn(f).join().expect("thread"))
}

/// Memory line of an idxpool pool of `MEM_LIVE` objects on 4 KiB pages whose construction
/// requested `heap` bytes from the global allocator.
pub(crate) fn idx_line<T: Obj, B: Brand, R: Repr>(
    name: &str,
    pool: Pool<T, B, R>,
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
    // The common ring's slots: an exact-size ring of `live` entries has the next power of two.
    let slots = (live as usize).next_power_of_two();
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

pub(crate) fn idx_memory<T: Obj>(out: &mut Vec<MemLine>) {
    idxpool::brand!(MemIdx);
    idxpool::brand!(MemPtr);
    let b = || {
        PoolBuilder::<T>::with_default(MEM_LIVE as u32)
            .backing(BackingPolicy::Require(Backing::Pages4K))
            .cache_size(512)
    };
    let (pool, heap) = counted(|| b().build_named::<MemIdx>().expect("pool"));
    idx_line("idxpool (index)", pool, heap, out);
    let (pool, heap) = counted(|| {
        b().repr::<idxpool::Pointer>()
            .build_named::<MemPtr>()
            .expect("pool")
    });
    idx_line("idxpool-ptr", pool, heap, out);
}

pub(crate) fn peers_memory<T: Obj>(out: &mut Vec<MemLine>) {
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

pub(crate) fn memory_report() {
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
