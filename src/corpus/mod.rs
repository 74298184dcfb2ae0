//! Corpora: reading files and cutting text, one concept seen from two sides.
//!
//! * [`read`]: a corpus file (plain text, gzip, JSON lines) streamed as decoded blocks, for
//!   counting (`crate::count`) and file encoding (`crate::files`); a block ends where the text
//!   may be cut.
//! * [`cuts`]: where text may be cut without changing its pre-tokens: the safe-cut rule the
//!   reader cuts blocks at, the segments batches and counting cut long documents into, and
//!   where a shard of a file may start (`shard_cuts`).

pub mod cuts;
pub mod read;
