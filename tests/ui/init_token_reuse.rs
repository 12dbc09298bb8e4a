// A `Written` proof is tied to its object by a fresh invariant lifetime: one kept from an
// earlier object cannot be returned for the next one (which would leave it uninitialised).
use idxpool::{InitSlot, Written};

fn main() {
    let mut kept: Option<Written<'_>> = None;
    let pool = idxpool::PoolBuilder::<&'static u64>::with_init(2, |i, slot: InitSlot<'_, _>| {
        if i == 0 {
            kept = Some(slot.write(&7));
        }
        kept.take().unwrap()
    });
    drop(pool);
}
