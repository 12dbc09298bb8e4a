//! Criterion micro-benchmarks of the cached fast path: index pool vs pointer twin, per flush
//! policy, against the floor of a bare `Vec<u32>` used as a LIFO free list.
//!
//! ```sh
//! cargo bench -p idxpool-bench --bench pool                 # everything (about a minute)
//! cargo bench -p idxpool-bench --bench pool -- bulk32       # one group
//! ```
//!
//! Groups (each function is named `<pool>/<policy>`, `<pool>` = `index` or `pointer`):
//! * `single`: `get` + `put` of one object through a user-owned cache (`LocalCache`);
//! * `bulk32`: `get_bulk` + `put_bulk` of 32 (run-time size, into a `Vec`);
//! * `array32`: `get_array::<32>` + `put_array` (compile-time size, DPDK's `constant_n`);
//! * `touch`: `get`, write 8 bytes through `get_mut` (the index -> address conversion), `put`;
//! * each of `single` and `bulk32` also has `vec_u32_floor`: the same LIFO moves on a plain
//!   `Vec<u32>` of free indices, with no pool around it: how far the cached path is from the
//!   limit; `bulk32` also has `array_u32_floor`, the same on a fixed array and a length (no
//!   capacity checks: the true floor of moving 32 indices out and back).
//!
//! Objects are 2048 bytes (as in `examples/mempool_perf.rs`), the pool holds 1023 objects
//! (DPDK's `1 x (512 + 512) - 1`) with a cache of 512, prefaulted; every operation stays in
//! the cache after criterion's warm-up. Throughput is in objects (`elements`).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use idxpool::repr::Repr;
use idxpool::{Brand, FlushPolicy, Handle, Pool, PoolBuilder};

/// 2048-byte cache-line-aligned object; `head` is what `touch` writes.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    head: u64,
    rest: [u8; 2040],
}

const POOL_SIZE: u32 = 1023;
const CACHE_SIZE: u32 = 512;
const BULK: usize = 32;

fn group<'c>(c: &'c mut Criterion, name: &str, objs: u64) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(objs));
    g
}

/// Every pool benchmark on one pool.
fn bench_pool<B: Brand, R: Repr>(c: &mut Criterion, pool: &Pool<Obj, B, R>) {
    let id = format!("{}/{}", R::NAME, pool.policy());
    let mut cache = pool.local_cache();

    let mut g = group(c, "single", 1);
    g.bench_function(&id, |b| {
        b.iter(|| {
            let h = cache.get().expect("pool holds enough objects");
            cache.put(black_box(h));
        })
    });
    g.finish();

    let mut g = group(c, "bulk32", BULK as u64);
    let mut v: Vec<Handle<Obj, B, R>> = Vec::with_capacity(BULK);
    g.bench_function(&id, |b| {
        b.iter(|| {
            cache
                .get_bulk(&mut v, BULK)
                .expect("pool holds enough objects");
            black_box(&mut v);
            cache.put_bulk(&mut v);
        })
    });
    g.finish();

    let mut g = group(c, "array32", BULK as u64);
    g.bench_function(&id, |b| {
        b.iter(|| {
            let a = cache
                .get_array::<BULK>()
                .expect("pool holds enough objects");
            cache.put_array(black_box(a));
        })
    });
    g.finish();

    let mut g = group(c, "touch", 1);
    let mut n = 0u64;
    g.bench_function(&id, |b| {
        b.iter(|| {
            let mut h = cache.get().expect("pool holds enough objects");
            n += 1;
            pool.get_mut(&mut h).head = n;
            cache.put(h);
        })
    });
    g.finish();
}

/// The floor: a bare `Vec<u32>` LIFO free list, no pool, no cache bookkeeping.
fn bench_floor(c: &mut Criterion) {
    let mut free: Vec<u32> = (0..POOL_SIZE).collect();

    let mut g = group(c, "single", 1);
    g.bench_function("vec_u32_floor", |b| {
        b.iter(|| {
            let i = free.pop().expect("non-empty");
            free.push(black_box(i));
        })
    });
    g.finish();

    let mut g = group(c, "bulk32", BULK as u64);
    let mut burst = [0u32; BULK];
    g.bench_function("vec_u32_floor", |b| {
        b.iter(|| {
            let len = free.len();
            burst.copy_from_slice(&free[len - BULK..]);
            free.truncate(len - BULK);
            free.extend_from_slice(black_box(&burst));
        })
    });
    // The same moves on a fixed array and a length: no capacity check, no allocator path.
    let mut stack = [0u32; POOL_SIZE as usize];
    let mut len = stack.len();
    g.bench_function("array_u32_floor", |b| {
        b.iter(|| {
            burst.copy_from_slice(&stack[len - BULK..len]);
            len -= BULK;
            stack[len..len + BULK].copy_from_slice(black_box(&burst));
            len += BULK;
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_floor(c);
    for policy in FlushPolicy::ALL {
        let builder = || {
            PoolBuilder::<Obj>::zeroed(POOL_SIZE)
                .cache_size(CACHE_SIZE)
                .policy(policy)
                .prefault(true)
        };
        builder()
            .scoped(|pool| bench_pool(c, &pool))
            .expect("index pool");
        builder()
            .repr::<idxpool::Pointer>()
            .scoped(|pool| bench_pool(c, &pool))
            .expect("pointer pool");
    }
}

criterion_group! {
    name = pool;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(pool);
