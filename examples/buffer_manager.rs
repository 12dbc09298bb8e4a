//! A library-style buffer manager that owns a pool created at run time.
//!
//! `BufferManager` is what a library would export: built from a config value, stored in the
//! caller's structs, any number of instances at once (two here, plus the parallel tests at the
//! bottom, which `cargo test` runs), returning handles from its methods. It uses
//! a run-time [`idxpool::Pool`] in an `Arc`: no brand to declare, no `unsafe`, no closure-style API; a handle given
//! to the wrong manager is a typed error (`PoolError::ForeignHandle`), never another
//! manager's buffer. Its `Worker` keeps a `LocalCache` (holding a clone of the `Arc`) next to a clone of the pool, so it
//! can move into `std::thread::spawn`.
//!
//! `cargo run --release --example buffer_manager [--help]`

use std::sync::Arc;

use idxpool::{Handle, LocalCache, Pool, PoolBuilder, PoolError};

const HELP: &str = "\
buffer_manager: a library-style struct owning a run-time pool (idxpool::Pool in an Arc).
Creates two managers with different configurations, runs a worker thread on each at the
same time (std::thread::spawn, each with its own explicit cache), checks that a buffer of one
manager is refused by the other, and prints both managers' counters. Well under a second.

usage: buffer_manager [--help]
";

/// What the manager is built from (e.g. read from a config file).
#[derive(Clone, Debug)]
pub struct Config {
    /// Name shown in messages and leak reports.
    pub name: String,
    /// Number of buffers.
    pub buffers: u32,
    /// Per-thread cache size.
    pub cache: u32,
}

/// A fixed-size network buffer.
pub struct Buf {
    pub len: usize,
    pub data: [u8; 2048],
}

/// Hands out buffers by handle. Cloning it is cheap and shares the buffers.
#[derive(Clone)]
pub struct BufferManager {
    pool: Arc<Pool<Buf>>,
}

impl BufferManager {
    /// Builds the manager's pool.
    pub fn new(cfg: &Config) -> Result<Self, PoolError> {
        let pool = Arc::new(
            PoolBuilder::with_fn(cfg.buffers, |_| Buf {
                len: 0,
                data: [0; 2048],
            })
            .cache_size(cfg.cache)
            .name(cfg.name.clone())
            .build()?,
        );
        Ok(BufferManager { pool })
    }

    /// A buffer holding `payload`.
    pub fn alloc_with(&self, payload: &[u8]) -> Result<Handle<Buf>, PoolError> {
        let mut h = self.pool.get()?;
        let b = self.pool.get_mut(&mut h);
        b.len = payload.len().min(b.data.len());
        b.data[..b.len].copy_from_slice(&payload[..b.len]);
        Ok(h)
    }

    /// The payload of a buffer of this manager.
    ///
    /// # Errors
    /// `PoolError::ForeignHandle` for a buffer of another manager.
    pub fn payload<'a>(&'a self, h: &'a Handle<Buf>) -> Result<&'a [u8], PoolError> {
        let b = self.pool.try_get_ref(h)?;
        Ok(&b.data[..b.len])
    }

    /// Gives a buffer back.
    ///
    /// # Errors
    /// The handle itself, for a buffer of another manager.
    pub fn release(&self, h: Handle<Buf>) -> Result<(), Handle<Buf>> {
        self.pool.try_put(h)
    }

    /// Buffers currently handed out.
    pub fn in_use(&self) -> usize {
        self.pool.in_use()
    }

    /// A worker for one thread: owns an explicit cache (`'static`, `Send`).
    pub fn worker(&self) -> Worker {
        Worker {
            cache: LocalCache::new(self.pool.clone()),
            pool: self.pool.clone(),
        }
    }
}

/// One thread's view of a manager: its own cache, no thread-local lookup per buffer, and a
/// clone of the pool to convert handles through (so a `&mut Buf` can be held while the cache
/// allocates).
pub struct Worker {
    cache: LocalCache<Arc<Pool<Buf>>>,
    pool: Arc<Pool<Buf>>,
}

impl Worker {
    /// Takes `burst` buffers, writes a sequence number into each while holding a reference to
    /// the first (the cache keeps allocating meanwhile), checks and frees them; returns the
    /// bytes checked.
    pub fn round(&mut self, burst: usize, seq: u8) -> Result<usize, PoolError> {
        let objs = self.pool.resolver(); // converts handles; borrows the pool, not the cache
        let mut first = self.cache.get()?;
        let head = objs.get_mut(&mut first); // held across the gets below
        head.len = 1;
        head.data[0] = seq;
        let mut bufs = Vec::with_capacity(burst);
        self.cache.get_bulk(&mut bufs, burst)?;
        let mut checked = 0;
        for (k, h) in bufs.iter_mut().enumerate() {
            let b = objs.get_mut(h);
            b.len = 64;
            b.data[..64].fill(seq.wrapping_add(k as u8));
            checked += b.len;
        }
        assert_eq!(head.data[0], seq);
        for (k, h) in bufs.iter().enumerate() {
            assert!(objs.get_ref(h).data[..64]
                .iter()
                .all(|&x| x == seq.wrapping_add(k as u8)));
        }
        self.cache.put_bulk(&mut bufs);
        self.cache.put(first);
        Ok(checked + 1)
    }
}

/// Runs `rounds` rounds on a spawned thread (no `static`, no `scope`).
fn spawn_worker(m: &BufferManager, rounds: usize) -> std::thread::JoinHandle<usize> {
    let mut w = m.worker();
    std::thread::spawn(move || {
        (0..rounds)
            .map(|r| w.round(16, r as u8).expect("enough buffers"))
            .sum()
    })
}

fn main() -> Result<(), PoolError> {
    if let Some("-h" | "--help") = std::env::args().nth(1).as_deref() {
        print!("{HELP}");
        return Ok(());
    }
    let rx = BufferManager::new(&Config {
        name: "rx-bufs".into(),
        buffers: 512,
        cache: 32,
    })?;
    let tx = BufferManager::new(&Config {
        name: "tx-bufs".into(),
        buffers: 256,
        cache: 16,
    })?;
    let (a, b) = (spawn_worker(&rx, 2000), spawn_worker(&tx, 2000));
    let (bytes_a, bytes_b) = (a.join().unwrap(), b.join().unwrap());
    println!("rx-bufs worker checked {bytes_a} bytes, tx-bufs worker {bytes_b} bytes");

    let h = rx.alloc_with(b"hello")?;
    match tx.payload(&h) {
        Err(e) => println!("tx refuses rx's buffer: {e}"),
        Ok(_) => unreachable!("a foreign handle never resolves"),
    }
    let h = tx.release(h).unwrap_err(); // handed back, not lost
    println!(
        "rx payload: {:?}",
        std::str::from_utf8(rx.payload(&h)?).unwrap()
    );
    rx.release(h).ok();
    println!(
        "in use after the run: rx {} tx {} (caches flushed when the workers ended)",
        rx.in_use(),
        tx.in_use()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(name: &str) -> Config {
        Config {
            name: name.into(),
            buffers: 64,
            cache: 8,
        }
    }

    // The test harness runs these two in parallel: two live managers of the same type, which
    // a named brand would refuse (BrandInUse).
    #[test]
    fn instance_one() {
        let m = BufferManager::new(&cfg("test-one")).unwrap();
        assert_eq!(spawn_worker(&m, 50).join().unwrap(), 50 * (16 * 64 + 1));
        assert_eq!(m.in_use(), 0);
    }

    #[test]
    fn instance_two() {
        let m = BufferManager::new(&cfg("test-two")).unwrap();
        let h = m.alloc_with(b"abc").unwrap();
        assert_eq!(m.payload(&h).unwrap(), b"abc");
        m.release(h).unwrap();
        // Dropped and rebuilt under the same name, as a reload does.
        drop(m);
        let m = BufferManager::new(&cfg("test-two")).unwrap();
        assert_eq!(spawn_worker(&m, 50).join().unwrap(), 50 * (16 * 64 + 1));
    }

    #[test]
    fn a_buffer_of_another_manager_is_refused() {
        let a = BufferManager::new(&cfg("refuse-a")).unwrap();
        let b = BufferManager::new(&cfg("refuse-b")).unwrap();
        let h = a.alloc_with(b"x").unwrap();
        assert!(matches!(
            b.payload(&h),
            Err(PoolError::ForeignHandle { .. })
        ));
        let h = b.release(h).unwrap_err();
        a.release(h).unwrap();
        assert_eq!(a.in_use() + b.in_use(), 0);
    }
}
