// Package store is SmartGo's message store: a RocketMQ-compatible
// commitlog of memory-mapped segments, consume queues and a hash index
// built from it by a dispatcher, group-commit flushing, checkpoint-based
// crash recovery and time/space based retention.
//
// # Directory layout
//
//	<root>/commitlog/<20-digit start offset>         segments, SegmentSize bytes each
//	<root>/consumequeue/<topic>/<queueId>/<20-digit>  consume-queue files, CQEntriesPerFile*20 bytes
//	<root>/index/<yyyyMMddHHmmssSSS>                  index files
//	<root>/checkpoint                                 28 bytes, see below
//	<root>/abort                                      empty; exists while a store has the root open
//	<root>/lock                                       empty; flock(LOCK_EX) held while open
//	<root>/epochs                                     master epochs and their start offsets (controller mode), see epoch.go
//	<root>/queues                                     every consume queue and its end at the last clean shutdown, see queues.go
//
// All integers are big-endian. File names are the zero-padded decimal start
// offset of the file (commitlog: byte offset in the log; consume queue: byte
// offset in the queue, i.e. logical offset*20), so the name of the file
// holding offset x is x - x%fileSize.
//
// # Commitlog segments (frozen)
//
// A segment is a run of records (format: store/record, protocol section 3.1)
// written back to back from byte 0. A record of n bytes is written only if
// at least n+8 bytes remain in the segment; otherwise the rest of the
// segment (r >= 8 bytes) is turned into a blank filler and the record goes
// to the start of the next segment:
//
//	+-----------------+--------------------+-------------------------+
//	| TOTALSIZE=r (4) | MAGIC 0xCBD43194 (4)| r-8 bytes, ignored      |
//	+-----------------+--------------------+-------------------------+
//
// So every segment but the last ends with exactly one filler, whose
// TOTALSIZE reaches the segment end. Bytes after the last record of the
// last segment are zero (a segment file is created sparse at its full
// size, and zeros are all it holds where nothing was written); a zero
// TOTALSIZE+MAGIC marks the end of the log. The store writes
// QUEUEOFFSET, PHYSICALOFFSET (= the record's own log offset, checked at
// recovery), STORETIMESTAMP and STOREHOST into each record, and seals it:
// the last property is a CRC of the whole record (store/record, "Record
// CRC trailer"; RocketMQ 5's __CRC32# property). Records written before
// sealing have no trailer and stay readable (legacy, checked by BODYCRC).
//
// # Verification on read
//
// Every record that leaves the process is verified first (record.Verify):
// pulls (GetMessages), lookups by offset (MessageAt, ReadMessage), queries
// by key (QueryByKey) and replication (ReadRaw). A record that fails is
// never served: a pull skips it (its queue offset is passed over), a
// lookup returns a *CorruptError, a query leaves it out; each refusal is
// counted (Stats.BadRecords), reported as an EventCorruption, and logged
// at ERROR, at most once per read path and reason every 10 s with the
// number of refusals in between (internal/ratelog).
//
// # Consume-queue entry (frozen), 20 bytes
//
//	0       8        12            20
//	+-------+--------+-------------+
//	| phy 8 | size 4 | tagsCode 8  |
//	+-------+--------+-------------+
//
// phy is the commitlog offset of the record, size its TOTALSIZE, tagsCode
// the Java String.hashCode of its TAGS property (0 without tags, or the
// Options.TagsCode hook's value). Entry i of a queue (logical offset i) is
// at byte i*20. An all-zero entry ends the queue; an entry with
// phy=-1 (0xFFFFFFFFFFFFFFFF) and size=0 is a hole (a logical offset with
// no record, written only when a gap had to be padded; readers skip it).
// Prepared and rollback transaction records get no entry. A queue's
// newest entries (up to a page of them) are written to its file with one
// pwrite when they fill a page's worth, and at every logic flush; a
// killed process may leave them out, and recovery makes them again from
// the commitlog (consumequeue.go).
//
// # Index file (frozen)
//
//	header (40) | slots (IndexSlots*4) | entries (IndexEntries*20)
//
// Header: beginTimestamp 8, endTimestamp 8 (store ms of first/last
// entry), beginPhyOffset 8, endPhyOffset 8 (in the newest file, the last
// record the indexer walked, keys or not: where it resumes after a
// restart), usedSlotCount 4 (slots that
// hold a chain), indexCount 4 (next entry number; starts at 1, entry 0 is
// never used). Slot i (4 bytes) holds the number of the newest entry whose
// hash%IndexSlots == i, 0 for none. Entry n sits at
// 40 + IndexSlots*4 + n*20:
//
//	0          4         12            16            20
//	+----------+---------+-------------+-------------+
//	| keyHash 4| phy 8   | timeDiff 4  | prevEntry 4 |
//	+----------+---------+-------------+-------------+
//
// keyHash = |JavaHashCode(topic + "#" + key)| (0 for MinInt32); timeDiff
// is (storeTimestamp - beginTimestamp) in seconds; prevEntry chains
// entries of the same slot (0 ends the chain; chains only go to lower
// numbers). Keys are each space-separated KEYS value and UNIQ_KEY;
// rollback records are not indexed. A file is full when indexCount
// reaches IndexEntries; a new file is named after the store clock (ms).
// New entries are written (pwrite) once 256 KiB of them wait and before
// each index sync; the newest file's header and slot table are kept in memory and written
// together at each index sync (IndexFlushInterval, and Close), so the file
// is always read, never written, through its mapping.
//
// # Checkpoint (frozen), 28 bytes
//
//	0              8              16             24       28
//	+--------------+--------------+--------------+--------+
//	| physicMsgTs 8| logicsMsgTs 8| indexMsgTs 8 | CRC 4  |
//	+--------------+--------------+--------------+--------+
//
// Store timestamps (ms) of the newest record known durable in the
// commitlog, in consume queues and in the index; CRC is CRC32-IEEE of bytes
// 0..23. It is written after the files it describes were fdatasynced: the
// first time in a run replaced atomically (temp file, fsync, rename, fsync
// dir: internal/fsutil), then overwritten in place (pwrite of the 28 bytes
// at offset 0, fdatasync; see writeCheckpoint). A torn or altered
// checkpoint fails the CRC, is reported, and recovery scans from the first
// segment.
//
// # Abort and lock
//
// Open takes flock(LOCK_EX|LOCK_NB) on <root>/lock (a second store on the
// same root fails with ErrLocked) and creates <root>/abort (fsyncing the
// directory). Close removes abort after everything is flushed. abort
// present at Open means the last run crashed.
//
// # Recovery
//
// Recovery keeps every valid record. A record is valid when its magic,
// TOTALSIZE, PHYSICALOFFSET (its own position) and integrity (whole-record
// CRC; BODYCRC for legacy records, with CheckCRCOnRecover) agree. From the
// first segment it validates, recovery steps over valid records; at bytes
// that are anything else (damage, zeros, the rest of a short segment) it
// searches forward for the next valid record (resync.go), in this segment
// or a later one. If there is one, the bytes in between are a skipped
// range: reported, never cut, and the records after it stay readable
// through their consume queues. If there is none, those bytes are the torn
// tail: the log ends at the last valid record, the rest of its segment is
// zeroed and synced (so no stale record can reappear after a later hole)
// and later segments, which hold no valid record, are removed. A segment
// missing in the middle of the sequence is recreated empty (its blocks
// reserved: no room fails the open) and skipped the same way; the
// segments after it are kept.
//
// Which segments are validated: at a normal start, the last
// RecoverSegments (and any segment found short); after a crash (abort file
// present), every segment with VerifyAllOnCrash (the default), else from
// the newest segment whose first record is older than min(checkpoint) -
// 3 s. RecoveryReport.ScanBytes and ScanDuration give the cost; the broker
// serves only after Open returns.
//
// Consume queues are validated from their last RecoverSegments files (each
// entry must point at the matching record of its queue, with the right
// tagsCode); entries beyond the log end or invalid are cut. Then records
// are re-dispatched from the older of the crash point and the end of the
// queues' last entries, each record verified before it makes an entry
// (a damaged record never makes a phantom topic or queue), skipping
// entries that already exist; a gap in a queue triggers a re-dispatch from
// the log start, and offsets of records lost to damage become holes.
// After a clean shutdown the queues are also checked against the queue
// manifest that shutdown wrote (queues.go): a queue missing or shorter
// than listed (files deleted while the store was closed) is reported and
// re-dispatched from the commitlog. The
// indexer then walks from the newest index file's endPhyOffset (it trails
// the dispatcher, see indexer.go). Index files are checked against what
// the layout implies (index_check.go): the newest at start, the older ones
// by the index-repair goroutine once the store serves. A damaged one is
// reported and rebuilt from the commitlog for the range it covered, in
// its place (index_repair.go); meanwhile it answers what it still can
// (every record a query returns is checked against its key). One whose
// header is lost too covers the range between its neighbours'; at the end
// of the list it is removed and its records indexed again at start.
//
// Every skipped range (RecoveryReport.Skipped: segment, offset range,
// bytes, and the number of consume-queue entries pointing into it, i.e.
// stored records lost) is logged at ERROR; it and every cut of non-zero
// bytes is a *CorruptError in RecoveryReport.Corruptions. At run time the
// dispatcher and indexer skip bytes that are not a record the same way
// (replicated zeros, see ReadRaw), logging at ERROR (rate-limited).
//
// Recovery can be stopped: OpenContext's context (the broker passes the
// process's stop signal) is looked at every 1,024 records of the
// commitlog check, the re-dispatch and the index walk, and between the
// consume queues. Open then returns its error wrapped ("store: recovery
// stopped during <step>; the next start recovers again"), having cut
// nothing from the commitlog that the check had not reached the end of,
// and leaves the abort file: the next start recovers as after a crash
// (recover_stop.go).
//
// # Segment allocation
//
// A segment's blocks are allocated ahead of the writer, Preallocate bytes
// (default 64 MiB) at a time: a new segment gets its first chunk
// (fallocate; with WarmSegments and FlushSync also written with zeros and
// synced, so that group-commit fdatasyncs overwrite written blocks and
// carry no extent conversions), and the allocator goroutine adds the next
// chunk when the writer enters the last allocated one. So a segment takes
// the disk its records need plus at most two chunks, not SegmentSize up
// front (Preallocate >= SegmentSize allocates whole segments, as before).
// Nothing is ever written through a mapping where no block is allocated:
// a store to such a page faults (SIGBUS) when the disk is full. Consume-
// queue files are allocated 64 KiB ahead of their entries the same way.
//
// # Disk space
//
// Writes are refused while the disk is full: while the commitlog's next
// chunk would take the disk holding the root above DiskFullRatio (see
// space.go). Puts then fail with ErrDiskFull (PutServiceNotAvailable; the
// broker answers SERVICE_NOT_AVAILABLE and registers without write
// permission), WritesRefused says why, and writes resume by themselves
// within a second or so of space freeing. Every commitlog allocation is
// checked against the mark first, and a put near the mark checks the disk
// itself, so refusal comes before ENOSPC. Retention deletes expired
// segments; above DiskForceCleanRatio it deletes an unexpired one only
// when every consumer group has consumed it (Options.Consumed), unless
// DiskForceClean is set, which deletes the oldest anyway and logs, at
// WARN, how many unconsumed messages that lost (Stats.ForceDeletedUnconsumed).
// Neither deletes a segment holding a record Options.Retain protects, nor
// any segment after it (retainfloor.go; Stats.RetainHeldBytes).
//
// # Open descriptors
//
// A mapped file (segment, consume-queue or index file) is read through
// its mapping, which keeps the file reachable without a descriptor. A
// descriptor is needed only to pwrite, fdatasync, msync or fallocate the
// file and for lseek SEEK_DATA/SEEK_HOLE at recovery, so the store keeps
// at most Options.MaxOpenFiles of them (default 1000; store.max_open_files;
// less the descriptors of the process's io_uring sync rings, up to 16,
// vfs.SyncDescriptors) in one cache (fdcache.go): a file whose descriptor was closed is
// reopened by path the next time one of those calls needs it (and only
// if the path still names the file mapped: same device and inode), and
// the clock algorithm picks which to close, never one a call is using
// nor the active commitlog segment (written at every put). Files
// opened at start and files flushed to their end give their descriptor
// back at once: they are only read from then on. A consume-queue file
// that a flush reopened while the cache was full gives its descriptor
// back after its fdatasync: with more files to flush than descriptors,
// the files that kept one keep it and the others take turns in the room
// left (a round reopens only the files beyond the bound, where the clock
// would close, at each reopen, a file the same round needs next). Stats.OpenFiles and
// Stats.FileReopens count them. A store with 16,000 queues therefore
// holds about MaxOpenFiles descriptors, not one per file (each file still
// takes one mapping: vm.max_map_count, 65,530 by default, bounds the
// files). Durability is that of the file, not of the descriptor: an
// fdatasync through a reopened descriptor writes out what earlier ones
// wrote, and a writeback error nobody has seen is reported to the next
// fdatasync of the file, whichever descriptor makes it. When the process
// runs out of descriptors (EMFILE, its sockets took them), a reopen closes
// another idle descriptor of the store and tries again.
//
// # Failures
//
// What the store does when a file operation fails (tested by injecting
// each with store/vfs.Faulty):
//
//   - fdatasync or msync of the commitlog fails: fail-stop. The error is
//     sticky (ErrWriteFailed), puts waiting for that sync are not
//     acknowledged as durable, later puts are refused, reads go on, and
//     Close keeps the abort file so the next start recovers as after a
//     crash (after a failed fsync, what the page cache held may be gone).
//   - a commitlog write fails with EIO: fail-stop, as above.
//   - a commitlog write, or an allocation of its blocks, fails with ENOSPC
//     or EDQUOT: nothing of that put stays in the log (records buffered
//     for a group commit are taken back and their queue offsets reused,
//     and their putters are told they were not stored); the put fails with
//     ErrDiskFull, the disk counts as full until the space check finds
//     room, and the store does not fail. A batch refused part way may
//     leave its first records stored, as a retry of it may.
//   - any other allocation failure: that put fails, nothing was written,
//     the next put tries again.
//   - a consume-queue entry cannot be written (its file cannot grow): the
//     dispatcher waits at that record and tries again every second; the
//     message is stored and appears in its queue once the entry is
//     written.
//   - a consume-queue, index or checkpoint flush fails: logged (rate-
//     limited), the checkpoint stays where it was until a flush succeeds,
//     writes go on; if the flush at Close fails, the abort file is kept.
//   - an index write fails: logged (rate-limited); keys of the records
//     being indexed are not found by key queries.
//
// # Concurrency
//
// See LOCKING.md. One writer (putMu) appends into a write-behind buffer
// written with one pwrite per group commit (FlushSync), or, for puts
// answered asynchronously that wait for no flush (PutAsync), with one
// pwrite per dispatcher round, the dispatcher answering them after it
// (writebehind.go); with FlushAsync it copies another single put into the
// mapping and writes a batch with one pwrite (Options.AsyncWrites has the
// other choices), and then publishes the new end (an atomic) once the
// bytes are in the page cache; the dispatcher, flusher and readers only touch bytes below it.
// The writer notes for each record it appends what the dispatcher and the
// indexer need of it (wrote.go); they read back only records without a
// note (recovery, replicated bytes). Files carry reference counts: readers hold a
// reference until GetResult.Release, and a deleted file is unmapped when
// the last reference goes.
package store
