// A slot of a caller's table (get_into / put_from) is an Option<Handle>: before a successful
// get it holds None, and nothing reads it as a handle without saying what happens when it is
// empty. Neither a put of the slot itself nor a move out of the table compiles.
use idxpool::{Handle, PoolBuilder};

fn main() {
    let pool = PoolBuilder::<u64>::with_default(4).build().unwrap();
    let mut table: [Option<Handle<u64>>; 4] = Default::default();
    pool.put(table[0]);
    let h: Handle<u64> = table[1];
    pool.put(h);
}
