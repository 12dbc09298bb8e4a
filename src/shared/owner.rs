//! Process identity, liveness, and the words of the per-object owner table.
//!
//! A process is its pid **and** start time (`/proc/<pid>/stat` field 22, ticks since boot): a
//! reused pid is not the original holder; a zombie (killed, unreaped) is dead.
//!
//! Owner-table words: [`FREE`] (0: in the common ring or a process cache), [`IN_CHANNEL`]
//! (`u32::MAX`: in a handle channel), else a *holder id* `(gen << 8) | (slot + 1)`: the attachment
//! that claimed process slot `slot` when its generation counter became `gen` (mod 2^24). Each claim
//! bumps the generation, so gone attachments' ids never match the slot's current holder.

use std::io;

/// Owner word of a free object.
pub(crate) const FREE: u32 = 0;
/// Owner word of an object in a handle channel.
pub(crate) const IN_CHANNEL: u32 = u32::MAX;
/// Generations are kept modulo 2^24 in holder ids.
pub(crate) const GEN_MASK: u32 = 0x00FF_FFFF;
/// Set in a process slot's owner word while a reclaimer owns the slot of a dead process.
pub(crate) const RECLAIM_BIT: u64 = 1 << 63;
/// pids are below 2^22 on Linux (`PID_MAX_LIMIT`).
const PID_BITS: u32 = 22;

/// The holder id of the attachment in `slot` with generation `gen`.
#[inline]
pub(crate) fn holder_id(slot: u32, gen: u32) -> u32 {
    debug_assert!(slot < 0xFE);
    ((gen & GEN_MASK) << 8) | (slot + 1)
}

/// `(slot, gen)` of a holder id (not FREE or IN_CHANNEL).
#[inline]
pub(crate) fn split_holder(id: u32) -> (u32, u32) {
    ((id & 0xFF).wrapping_sub(1), id >> 8)
}

/// A process as the shared pool records it: pid plus start time.
///
/// ```
/// use idxpool::shared::ProcessId;
/// let me = ProcessId::current()?;
/// assert_eq!(me.pid, std::process::id());
/// assert!(me.is_alive());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

/// What `/proc/<pid>/stat` says about a pid.
struct Stat {
    state: u8,
    start_time: u64,
}

fn read_stat(pid: u32) -> io::Result<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Field 2 (comm) is parenthesised and may hold spaces and ')': the rest follows the last ')'.
    let rest = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); field 22 (starttime) is at index 22 - 3.
    let state = fields
        .first()
        .and_then(|s| s.bytes().next())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "stat has no state"))?;
    let start_time = fields
        .get(22 - 3)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "stat has no starttime"))?;
    Ok(Stat { state, start_time })
}

impl ProcessId {
    /// The calling process.
    ///
    /// # Errors
    /// The error of reading `/proc/self/stat` (no procfs).
    pub fn current() -> io::Result<ProcessId> {
        let pid = std::process::id();
        let st = read_stat(pid)?;
        Ok(ProcessId {
            pid,
            start_time: st.start_time,
        })
    }

    /// True while the process runs: `/proc/<pid>/stat` has the same start time, not a zombie (`Z`)
    /// or dead (`X`); needs a shared pid namespace. Else `kill(pid, 0)` decides: a hidden pid
    /// (`hidepid`) counts as alive, so nothing is reclaimed from a process not proven dead.
    pub fn is_alive(self) -> bool {
        match read_stat(self.pid) {
            Ok(st) => st.start_time == self.start_time && st.state != b'Z' && st.state != b'X',
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Ok(pid) = libc::pid_t::try_from(self.pid) else {
                    return false;
                };
                // SAFETY: signal 0 only checks for existence and permission; nothing is sent.
                let r = unsafe { libc::kill(pid, 0) };
                r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
            }
            // Unreadable for another reason: assume alive.
            Err(_) => true,
        }
    }

    /// Packs into a process slot's owner word: `start_time << 22 | pid` (never 0, bit 63 clear).
    pub(crate) fn pack(self) -> u64 {
        ((self.start_time << PID_BITS) | self.pid as u64) & !RECLAIM_BIT
    }

    /// Unpacks an owner word (ignoring [`RECLAIM_BIT`]).
    pub(crate) fn unpack(word: u64) -> ProcessId {
        let w = word & !RECLAIM_BIT;
        ProcessId {
            pid: (w & ((1 << PID_BITS) - 1)) as u32,
            start_time: w >> PID_BITS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_is_alive_and_packs_round_trip() {
        let me = ProcessId::current().unwrap();
        assert!(me.is_alive());
        assert_eq!(ProcessId::unpack(me.pack()), me);
        assert_eq!(ProcessId::unpack(me.pack() | RECLAIM_BIT), me);
        let other = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(
            !other.is_alive(),
            "a different start time is another process"
        );
    }

    #[test]
    fn holder_ids_round_trip_and_avoid_markers() {
        for slot in [0, 1, 127] {
            for gen in [0, 1, GEN_MASK, GEN_MASK + 5] {
                let id = holder_id(slot, gen);
                assert_ne!(id, FREE);
                assert_ne!(id, IN_CHANNEL);
                assert_eq!(split_holder(id), (slot, gen & GEN_MASK));
            }
        }
    }
}
