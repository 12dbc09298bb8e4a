// `Element` is sealed: a user's unsized type cannot become a pool's object type (the builder
// zero-fills byte buffers, which a `NonZeroU8` field would not survive).
use std::num::NonZeroU8;

struct Frame {
    tag: NonZeroU8,
    bytes: [u8],
}

impl idxpool::Element for Frame {
    fn fixed_layout() -> Option<std::alloc::Layout> {
        None
    }
    fn from_addr(p: *mut u8, len: usize) -> *mut Self {
        std::ptr::slice_from_raw_parts_mut(p, len) as *mut Frame
    }
    fn needs_drop() -> bool {
        false
    }
}

fn main() {
    let _ = |f: &Frame| (f.tag, f.bytes.len());
}
