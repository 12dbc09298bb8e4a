//! Which frames are lent to the kernel, and to which ring (feature `xdp`).
//!
//! Frames are lent on the **fill** ring (back on the RX ring) and the **TX** ring (back on the
//! completion ring). [`FrameLedger`] keeps one state byte per frame. Lending consumes the
//! handle; reclaiming validates the descriptor (in the UMEM, the packet in its frame, the frame
//! lent to the ring it came back on) before rebuilding the handle, so a descriptor returned
//! twice, never lent, or lent to the other ring is refused: never a second handle.

use crate::error::{DescriptorFault, PoolError};
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::repr::ReprImpl;
use crate::xdp::rx_object::sealed::Checked;
use crate::xdp::{FrameMap, RxObject};

/// The ring a frame is lent to ([`FrameLedger::lend`]).
///
/// ```
/// use idxpool::xdp::LentTo;
/// assert_ne!(LentTo::Fill, LentTo::Tx);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LentTo {
    /// The fill ring: the kernel may write a packet; back on the RX ring.
    Fill = 1,
    /// The TX ring: the kernel reads it; back on the completion ring.
    Tx = 2,
}

const NOT_LENT: u8 = 0;

type H<P> = Handle<<P as PoolRef>::T, <P as PoolRef>::B, <P as PoolRef>::R>;

/// The frames of a pool lent to the kernel, counted by [`crate::Pool::lent_to_kernel`]: the one
/// place where a descriptor becomes a handle again. `P` holds the pool, so a rebuilt handle is
/// always its. Frames still lent at drop go back (an owning socket closes the kernel first).
///
/// ```
/// use std::sync::Arc;
/// use idxpool::xdp::{FrameLedger, LentTo};
/// use idxpool::{PoolBuilder, PoolError, StrideMode};
///
/// let pool = Arc::new(PoolBuilder::<[u8; 2048]>::zeroed(8).stride(StrideMode::Natural).build()?);
/// let mut ledger = FrameLedger::new(pool.clone())?;
/// let h = pool.get()?;
/// let i = pool.index_of(&h);
/// let addr = ledger.lend(h, LentTo::Fill).map_err(|(_, e)| e)?; // the handle is given up
/// assert_eq!(addr, u64::from(i) * 2048);
/// assert_eq!(pool.lent_to_kernel(), 1);
/// // The kernel hands the frame back on the RX ring with a packet 256 bytes in:
/// let (h, offset) = ledger.reclaim(addr + 256, 60, LentTo::Fill)?;
/// assert_eq!((pool.index_of(&h), offset), (i, 256));
/// // The same descriptor again (a broken peer): refused, no second handle.
/// let again = ledger.reclaim(addr + 256, 60, LentTo::Fill);
/// assert!(matches!(again, Err(PoolError::BadDescriptor { .. })));
/// pool.put(h);
/// assert_eq!(pool.lent_to_kernel(), 0);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct FrameLedger<P: PoolRef + 'static>
where
    P::T: RxObject,
{
    map: FrameMap,
    /// One byte per frame: `NOT_LENT` or a `LentTo`.
    state: Vec<u8>,
    lent: [u32; 2],
    object_size: u64,
    refused: u64,
    pool: P,
}

impl<P: PoolRef + 'static> FrameLedger<P>
where
    P::T: RxObject,
{
    /// A ledger over the pool's frames now (not a later [`crate::Pool::grow`]'s objects).
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] when the region cannot be a UMEM (`FrameMap::new`).
    pub fn new(pool: P) -> Result<Self, PoolError> {
        let p = pool.pool();
        let map = FrameMap::of_pool(p)?;
        let frames = p.capacity() as usize;
        let mut state = Vec::new();
        state
            .try_reserve_exact(frames)
            .map_err(|_| PoolError::overflow("xdp frame ledger"))?;
        state.resize(frames, NOT_LENT);
        Ok(FrameLedger {
            map,
            state,
            lent: [0; 2],
            object_size: p.object_size().min(p.stride()) as u64,
            refused: 0,
            pool,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &P {
        &self.pool
    }

    /// The frame map in use.
    pub fn map(&self) -> FrameMap {
        self.map
    }

    /// Frames: the pool's capacity when the ledger was made.
    pub fn frames(&self) -> u32 {
        self.state.len() as u32
    }

    /// Frames lent to `ring` now.
    pub fn lent(&self, ring: LentTo) -> u32 {
        self.lent[ring as usize - 1]
    }

    /// Descriptors refused since creation (each also returned as an error).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The indices of every frame lent now, in order.
    pub fn lent_indices(&self) -> Vec<u32> {
        (0..self.frames())
            .filter(|&i| self.state[i as usize] != NOT_LENT)
            .collect()
    }

    /// Lends `h`'s object to `ring`: gives the handle up, returns the frame's UMEM offset.
    ///
    /// # Errors
    /// The handle back, with [`PoolError::ForeignHandle`] (another run-time pool's) or
    /// [`PoolError::IndexOutOfRange`] (added by a later `grow`: not a UMEM frame).
    pub fn lend(&mut self, h: H<P>, ring: LentTo) -> Result<u64, (H<P>, PoolError)> {
        if let Err(e) = self.pool.pool().check(&h) {
            return Err((h, e));
        }
        match self.lend_owned(h, ring) {
            Ok(off) => {
                self.add_kernel_lent(1);
                Ok(off)
            }
            Err(h) => {
                let index = self.pool.pool().index_of(&h);
                let capacity = self.frames();
                Err((h, PoolError::IndexOutOfRange { index, capacity }))
            }
        }
    }

    /// [`FrameLedger::lend`] of this pool's handle, the pool's count left to the caller (once
    /// per burst). The handle back past the UMEM.
    #[inline(always)]
    pub(crate) fn lend_owned(&mut self, h: H<P>, ring: LentTo) -> Result<u64, H<P>> {
        let index = <P::R as ReprImpl>::index(&self.pool.pool().geometry, h.entry());
        let Some(off) = self.map.offset(index) else {
            return Err(h);
        };
        // Some only below the ledger's capacity: `state` has the slot. Handles are unique, so
        // this frame was not lent.
        let s = &mut self.state[index as usize];
        debug_assert_eq!(*s, NOT_LENT);
        *s = ring as u8;
        self.lent[ring as usize - 1] += 1;
        // The kernel's now: the handle (no destructor) is given up.
        let _given_up = h.into_entry();
        Ok(off)
    }

    /// Takes back the frame of descriptor `(addr, len)` (from RX for [`LentTo::Fill`], from
    /// completion for [`LentTo::Tx`]): its handle and the packet's offset in the object.
    ///
    /// # Errors
    /// [`PoolError::BadDescriptor`], nothing handed out: past the last frame
    /// ([`DescriptorFault::OutOfRange`]), the packet past its object
    /// ([`DescriptorFault::PastFrame`]) or starting in its header
    /// ([`DescriptorFault::InHeader`]: a [`crate::PacketBuf`]'s first 16 bytes), or the frame
    /// not lent to `ring` ([`DescriptorFault::NotLent`]: returned twice, never lent, or lent
    /// to the other ring).
    ///
    /// A [`crate::PacketBuf`] from the fill ring gets data window `[offset - 16, offset - 16 +
    /// len)` and tag 0, as a receive sets; one from the TX ring comes back as lent.
    pub fn reclaim(&mut self, addr: u64, len: u32, ring: LentTo) -> Result<(H<P>, u32), PoolError> {
        match self.reclaim_owned(addr, len, ring) {
            Ok((mut h, within)) => {
                self.add_kernel_lent(-1);
                if ring == LentTo::Fill && <P::T as RxObject>::FRONT > 0 {
                    // `reclaim_owned` checked FRONT <= within, within + len in the object.
                    let off = within - <P::T as RxObject>::FRONT;
                    self.pool
                        .pool()
                        .get_mut(&mut h)
                        .received_fitting(off, len, 0, Checked(()));
                }
                Ok((h, within))
            }
            Err(fault) => Err(PoolError::BadDescriptor { addr, len, fault }),
        }
    }

    /// [`FrameLedger::reclaim`] without the pool's count (the caller's, per burst); the bare
    /// fault as error.
    #[inline(always)]
    pub(crate) fn reclaim_owned(
        &mut self,
        addr: u64,
        len: u32,
        ring: LentTo,
    ) -> Result<(H<P>, u32), DescriptorFault> {
        match take::<P::T>(
            &self.map,
            &mut self.state,
            self.object_size,
            addr,
            len,
            ring,
        ) {
            Ok((index, within)) => {
                self.lent[ring as usize - 1] -= 1;
                let geometry = &self.pool.pool().geometry;
                let h = Handle::from_entry(<P::R as ReprImpl>::encode(geometry, index));
                Ok((h, within))
            }
            Err(fault) => {
                self.refused += 1;
                Err(fault)
            }
        }
    }

    /// [`FrameLedger::reclaim_owned`] over `n` descriptors (`desc(k)`: the `k`-th `(addr,
    /// len)`), `each(i, handle, within, len)` taking the `i`-th good one. Fields in locals,
    /// counts updated once: the caller's stores could alias them for all the compiler knows.
    /// Returns `(good, refused)`.
    #[inline(always)]
    pub(crate) fn reclaim_burst(
        &mut self,
        n: u32,
        ring: LentTo,
        mut desc: impl FnMut(u32) -> (u64, u32),
        mut each: impl FnMut(u32, H<P>, u32, u32),
    ) -> (u32, u32) {
        let (map, object_size) = (self.map, self.object_size);
        let geometry = self.pool.pool().geometry;
        let state = &mut self.state[..];
        let (mut good, mut bad) = (0u32, 0u32);
        for k in 0..n {
            let (addr, len) = desc(k);
            match take::<P::T>(&map, state, object_size, addr, len, ring) {
                Ok((index, within)) => {
                    let h = Handle::from_entry(<P::R as ReprImpl>::encode(&geometry, index));
                    each(good, h, within, len);
                    good += 1;
                }
                Err(_) => bad += 1,
            }
        }
        self.lent[ring as usize - 1] -= good;
        self.refused += u64::from(bad);
        (good, bad)
    }

    /// Moves TX completion `addr`'s frame to the fill ring's account (`recycle_tx`): no handle,
    /// the pool untouched; returns the frame's UMEM offset.
    ///
    /// # Errors
    /// As [`FrameLedger::reclaim`] for [`LentTo::Tx`] (the frame stays as it was).
    #[inline(always)]
    pub(crate) fn relend_tx_to_fill(&mut self, addr: u64) -> Result<u64, DescriptorFault> {
        let Some((index, _)) = self.map.split(addr) else {
            self.refused += 1;
            return Err(DescriptorFault::OutOfRange);
        };
        // `split` checked index < the map's capacity = state.len().
        let s = &mut self.state[index as usize];
        if *s != LentTo::Tx as u8 {
            self.refused += 1;
            return Err(DescriptorFault::NotLent);
        }
        *s = LentTo::Fill as u8;
        self.lent[LentTo::Tx as usize - 1] -= 1;
        self.lent[LentTo::Fill as usize - 1] += 1;
        Ok(u64::from(index) * self.map.stride())
    }

    /// Adds `n` (may be negative) to the pool's `lent_to_kernel` count.
    #[inline]
    pub(crate) fn add_kernel_lent(&self, n: isize) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.pool.pool().core.kernel_lent;
        if n >= 0 {
            c.fetch_add(n as usize, Relaxed);
        } else {
            c.fetch_sub(n.unsigned_abs(), Relaxed);
        }
    }

    /// Takes back every lent frame (the kernel side closed): handles appended to `out`, the
    /// pool's count lowered. Returns how many.
    pub(crate) fn reclaim_all(&mut self, out: &mut Vec<H<P>>) -> usize {
        let pool = self.pool.pool();
        let mut n = 0usize;
        for (i, s) in self.state.iter_mut().enumerate() {
            if *s != NOT_LENT {
                *s = NOT_LENT;
                out.push(Handle::from_entry(<P::R as ReprImpl>::encode(
                    &pool.geometry,
                    i as u32,
                )));
                n += 1;
            }
        }
        self.lent = [0; 2];
        self.add_kernel_lent(-(n as isize));
        n
    }
}

impl<T: ?Sized + RxObject, B: crate::Brand, R: crate::repr::Repr>
    FrameLedger<std::sync::Arc<crate::Pool<T, B, R>>>
{
    /// The pool, mutably, when this is its only reference (the socket's audit: quiescence).
    pub(crate) fn pool_mut(&mut self) -> Option<&mut crate::Pool<T, B, R>> {
        std::sync::Arc::get_mut(&mut self.pool)
    }
}

impl<P: PoolRef + 'static> Drop for FrameLedger<P>
where
    P::T: RxObject,
{
    fn drop(&mut self) {
        let mut back = Vec::new();
        if self.reclaim_all(&mut back) > 0 {
            self.pool.pool().put_bulk(&mut back);
        }
    }
}

impl<P: PoolRef + 'static> std::fmt::Debug for FrameLedger<P>
where
    P::T: RxObject,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameLedger")
            .field("frames", &self.frames())
            .field("lent_fill", &self.lent[0])
            .field("lent_tx", &self.lent[1])
            .field("refused", &self.refused)
            .finish()
    }
}
/// The one validation of a descriptor (DESIGN.md, "AF_XDP"): in the map, `within + len` in the
/// object, `within` past its `FRONT`, lent to `ring`. `(index, within)`, or the fault (no change).
#[inline(always)]
fn take<T: RxObject + ?Sized>(
    map: &FrameMap,
    state: &mut [u8],
    object_size: u64,
    addr: u64,
    len: u32,
    ring: LentTo,
) -> Result<(u32, u32), DescriptorFault> {
    let Some((index, within)) = map.split(addr) else {
        return Err(DescriptorFault::OutOfRange);
    };
    if u64::from(within) + u64::from(len) > object_size {
        return Err(DescriptorFault::PastFrame);
    }
    // 0 for `Pod` objects: no compare left.
    if (within as u64) < u64::from(T::FRONT) {
        return Err(DescriptorFault::InHeader);
    }
    // `split` checked index < state.len() (checked anyway: no unsafe for a foldable compare).
    match state.get_mut(index as usize) {
        Some(s) if *s == ring as u8 => {
            *s = NOT_LENT;
            Ok((index, within))
        }
        _ => Err(DescriptorFault::NotLent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pool, PoolBuilder, StrideMode};
    use std::sync::Arc;

    /// A burst reclaim takes and refuses what single reclaims would: every fault kind in one
    /// burst, the counts updated once at the end.
    #[test]
    fn a_burst_reclaims_and_refuses_as_single_reclaims_do() {
        let pool: Arc<Pool<[u8; 2048]>> = Arc::new(
            PoolBuilder::<[u8; 2048]>::zeroed(8)
                .stride(StrideMode::Natural)
                .build()
                .unwrap(),
        );
        let mut ledger = FrameLedger::new(pool.clone()).unwrap();
        let addrs: Vec<u64> = (0..4)
            .map(|_| {
                ledger
                    .lend(pool.get().unwrap(), LentTo::Fill)
                    .map_err(|(_, e)| e)
                    .unwrap()
            })
            .collect();
        let tx = ledger
            .lend(pool.get().unwrap(), LentTo::Tx)
            .map_err(|(_, e)| e)
            .unwrap();
        let descs = [
            (addrs[0] + 256, 64),  // good
            (addrs[0] + 256, 64),  // the same frame again: NotLent
            (tx, 64),              // a TX frame on the RX ring: NotLent
            (8 * 2048, 64),        // past the UMEM: OutOfRange
            (addrs[1] + 2000, 64), // past its frame: PastFrame
            (addrs[2] + 128, 100), // good
            (addrs[3], 2048),      // good: the whole frame
        ];
        let mut got = Vec::new();
        let (good, bad) = ledger.reclaim_burst(
            descs.len() as u32,
            LentTo::Fill,
            |k| descs[k as usize],
            |i, h, within, len| {
                assert_eq!(i as usize, got.len(), "the good ones counted in order");
                got.push((h, within, len))
            },
        );
        assert_eq!((good, bad), (3, 4));
        assert_eq!(ledger.refused(), 4);
        assert_eq!(ledger.lent(LentTo::Fill), 1, "frame 1 still lent");
        assert_eq!(ledger.lent(LentTo::Tx), 1);
        let seen: Vec<(u32, u32, u32)> = got
            .iter()
            .map(|(h, w, l)| (*w, pool.index_of(h), *l))
            .collect();
        let frame = |a: u64| (a / 2048) as u32;
        assert_eq!(
            seen,
            [
                (256, frame(addrs[0]), 64),
                (128, frame(addrs[2]), 100),
                (0, frame(addrs[3]), 2048)
            ]
        );
        ledger.add_kernel_lent(-(good as isize));
        for (h, _, _) in got {
            pool.put(h);
        }
        for (addr, ring) in [(addrs[1], LentTo::Fill), (tx, LentTo::Tx)] {
            let (h, _) = ledger.reclaim(addr, 0, ring).unwrap();
            pool.put(h);
        }
        drop(ledger);
        assert!(pool.is_full(), "every object back");
        assert_eq!(pool.lent_to_kernel(), 0);
    }
}
