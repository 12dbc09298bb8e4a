//! The `bytes` crate's types over pool objects (feature `bytes`): a guard becomes a
//! [`bytes::Bytes`] without a copy, and a [`PacketBuf`] is a [`Buf`] and a [`BufMut`].
//!
//! `Bytes::from_owner` (bytes 1.9, 2024) keeps any `AsRef<[u8]> + Send + 'static` owner
//! alive for as long as a clone of the `Bytes` exists; a [`Pooled`] guard that holds its pool
//! by `Arc` is such an owner (it forwards `AsRef` to its object), so the object goes back to
//! its pool, through the dropping thread's cache, when the last clone drops: on any thread,
//! and also after every other `Arc` of the pool is gone (the guard holds one). One 24-byte
//! box per conversion (the owner and its reference count), no copy of the data.
//!
//! ```
//! use std::sync::Arc;
//! use bytes::{Buf, BufMut, Bytes};
//! use idxpool::{PoolBuilder, Pooled};
//!
//! let pool = Arc::new(PoolBuilder::packet_bufs(8, 2048, 64).build()?);
//! let mut g = Pooled::get(pool.clone())?;
//! g.put_slice(b"hello world");                  // BufMut: into the tailroom
//! let data: Bytes = g.into_bytes();             // no copy
//! let tail = data.slice(6..);                   // a view of the same buffer
//! drop(pool);                                   // the guard inside keeps the pool alive
//! let other = std::thread::spawn(move || tail.chunk().to_vec()).join().unwrap();
//! assert_eq!(&other[..], b"world");
//! assert_eq!(&data[..5], b"hello");
//! drop(data);                                   // last clone: the buffer is back in its pool
//! # Ok::<(), idxpool::PoolError>(())
//! ```

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes};

use crate::guard::Pooled;
use crate::mempool::{Mempool, MempoolRef};
use crate::packet::PacketBuf;

/// Reading the data from the front: `advance` is [`PacketBuf::strip_front`].
impl Buf for PacketBuf {
    #[inline]
    fn remaining(&self) -> usize {
        self.len()
    }
    #[inline]
    fn chunk(&self) -> &[u8] {
        self.as_slice()
    }
    /// # Panics
    /// When `cnt` exceeds the data's length (the `Buf` contract).
    #[inline]
    fn advance(&mut self, cnt: usize) {
        if let Err(e) = self.strip_front(cnt) {
            panic!("Buf::advance past the data: {e}");
        }
    }
}

// SAFETY: `chunk_mut` is the tailroom (`spare_mut`), initialised bytes the buffer owns;
// `advance_mut(cnt)` makes exactly the first `cnt` of them data, and refuses (panics, before
// any change) a `cnt` beyond the tailroom, so `remaining_mut` (the tailroom) only ever
// shrinks by what was advanced and no uninitialised byte becomes data.
unsafe impl BufMut for PacketBuf {
    #[inline]
    fn remaining_mut(&self) -> usize {
        self.tailroom()
    }
    /// # Panics
    /// When `cnt` exceeds the tailroom (the `BufMut` contract).
    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        if let Err(e) = self.append(cnt) {
            panic!("BufMut::advance_mut past the tailroom: {e}");
        }
    }
    #[inline]
    fn chunk_mut(&mut self) -> &mut UninitSlice {
        UninitSlice::new(self.spare_mut())
    }
}

/// A packet buffer's guard reads as its buffer.
impl<P, M> Buf for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = PacketBuf>,
{
    #[inline]
    fn remaining(&self) -> usize {
        self.len()
    }
    #[inline]
    fn chunk(&self) -> &[u8] {
        self.as_slice()
    }
    #[inline]
    fn advance(&mut self, cnt: usize) {
        Buf::advance(&mut **self, cnt)
    }
}

// SAFETY: forwards every method to the buffer's `BufMut`, whose contract holds (above).
unsafe impl<P, M> BufMut for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = PacketBuf>,
{
    #[inline]
    fn remaining_mut(&self) -> usize {
        self.tailroom()
    }
    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's promise for `cnt` is passed on unchanged.
        unsafe { BufMut::advance_mut(&mut **self, cnt) }
    }
    #[inline]
    fn chunk_mut(&mut self) -> &mut UninitSlice {
        BufMut::chunk_mut(&mut **self)
    }
}

impl<P, M, T> Pooled<P>
where
    P: MempoolRef<Pool = M> + 'static,
    M: Mempool<Object = T>,
    T: ?Sized + AsRef<[u8]>,
    Pooled<P>: Send,
{
    /// The object's bytes (a packet buffer's data, a byte buffer's whole object) as a
    /// [`Bytes`], without a copy: `Bytes::from_owner(self)`. The guard lives in the `Bytes`
    /// and puts the object back, through the dropping thread's cache, when the last clone
    /// drops. `P` is `Arc<Pool>` (or a `&'static` pool). One small allocation (bytes' owner
    /// box); the data is not copied.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use idxpool::{PoolBuilder, Pooled};
    /// let pool = Arc::new(PoolBuilder::packet_bufs(4, 256, 32).build()?);
    /// let mut g = Pooled::get(pool.clone())?;
    /// g.extend_from_slice(b"abc")?;
    /// let b = g.into_bytes();
    /// let c = b.clone();
    /// assert_eq!(pool.in_use(), 1);
    /// drop(b);
    /// assert_eq!(pool.in_use(), 1);          // a clone still holds it
    /// drop(c);
    /// assert_eq!(pool.in_use(), 0);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

/// As [`Pooled::into_bytes`].
impl<P, M, T> From<Pooled<P>> for Bytes
where
    P: MempoolRef<Pool = M> + 'static,
    M: Mempool<Object = T>,
    T: ?Sized + AsRef<[u8]>,
    Pooled<P>: Send,
{
    fn from(g: Pooled<P>) -> Bytes {
        g.into_bytes()
    }
}
