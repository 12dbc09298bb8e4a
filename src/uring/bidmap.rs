//! `BidMap`: pool index <-> `(bgid, bid)` of the buffer groups, pure arithmetic.

use crate::error::PoolError;

use super::MAX_GROUP_SIZE;

/// The handle <-> `(bgid, bid)` mapping of a pool split into groups of `group_size` indices (a
/// power of two, at most [`MAX_GROUP_SIZE`]): group `k` has id `bgid_base + k` and holds
/// indices `k x group_size ..`; a buffer's bid is its index within its group.
///
/// ```
/// use idxpool::uring::BidMap;
/// let m = BidMap::new(100_000, 32_768, 7)?;
/// assert_eq!(m.groups(), 4);                        // 32768 + 32768 + 32768 + 1696
/// assert_eq!(m.locate(70_000), Some((9, 4_464))); // 70000 - 2 x 32768
/// assert_eq!(m.index(9, 4_464), Some(70_000));
/// assert_eq!(m.index(10, 1_696), None);             // the last group is short
/// assert_eq!(m.group_len(3), 1_696);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BidMap {
    pub(super) capacity: u32,
    pub(super) shift: u32,
    pub(super) bgid_base: u16,
}

impl BidMap {
    /// `capacity` buffers in groups of `group_size`, numbered from `bgid_base`.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] when `group_size` is not a power of two in
    /// `1..=MAX_GROUP_SIZE`, or the groups' ids would pass 65,535.
    pub fn new(capacity: u32, group_size: u32, bgid_base: u16) -> Result<Self, PoolError> {
        if !group_size.is_power_of_two() || group_size > MAX_GROUP_SIZE {
            return Err(PoolError::config(format!(
                "uring group_size {group_size}: must be a power of two of at most {MAX_GROUP_SIZE}"
            )));
        }
        let m = BidMap {
            capacity,
            shift: group_size.trailing_zeros(),
            bgid_base,
        };
        let last = u32::from(bgid_base) + m.groups().saturating_sub(1);
        if last > u32::from(u16::MAX) {
            return Err(PoolError::config(format!(
                "uring: {} groups from bgid {bgid_base} pass the 16-bit group id (last {last})",
                m.groups()
            )));
        }
        Ok(m)
    }

    /// Buffers per group (the last group may hold fewer: [`BidMap::group_len`]).
    pub fn group_size(&self) -> u32 {
        1 << self.shift
    }

    /// Number of groups: `ceil(capacity / group_size)`.
    pub fn groups(&self) -> u32 {
        ((u64::from(self.capacity) + u64::from(self.group_size()) - 1) >> self.shift) as u32
    }

    /// Buffers in group `k` (0 past the last group).
    pub fn group_len(&self, k: u32) -> u32 {
        let first = u64::from(k) << self.shift;
        (u64::from(self.capacity).saturating_sub(first)).min(u64::from(self.group_size())) as u32
    }

    /// The buffer group id of group `k`.
    pub fn bgid(&self, k: u32) -> u16 {
        (u32::from(self.bgid_base) + k) as u16
    }

    /// `(bgid, bid)` of pool index `index`, or None when it names no buffer.
    #[inline]
    pub fn locate(&self, index: u32) -> Option<(u16, u16)> {
        (index < self.capacity).then(|| {
            (
                self.bgid(index >> self.shift),
                (index & (self.group_size() - 1)) as u16,
            )
        })
    }

    /// The pool index of buffer `bid` of group `bgid`, or None when no buffer has that name.
    #[inline]
    pub fn index(&self, bgid: u16, bid: u16) -> Option<u32> {
        let k = u32::from(bgid.checked_sub(self.bgid_base)?);
        (u32::from(bid) < self.group_len(k)).then(|| (k << self.shift) | u32::from(bid))
    }
}
