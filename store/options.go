package store

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/store/vfs"
)

// AsyncWriteMode says how FlushAsync puts reach the page cache (FlushSync
// always writes with pwrite(2), one per group commit).
//
// In every mode but AsyncWriteMapped, a put answered asynchronously that
// waits for no flush (PutAsync: a broker's send) is written behind: the
// dispatcher writes the records of all such puts with one pwrite per round
// and then answers them (writebehind.go). The modes below say how the
// other puts (Put, PutWait, PutBatch) are written.
//
// The trade-off, measured on ext4: a put copied into the mapped segment
// (with write pre-faulting) costs ~1 µs, a lone record written with
// pwrite(2) 3-4 µs (BenchmarkStorePut). But every flush of mapped writes
// must write-protect the dirty pages again: the periodic fdatasync gets
// several times dearer (30-480 ms against 5-60 ms per 500 ms of e2e load),
// writes fault on pages under writeback, and a goroutine stuck in such a
// fault holds up the garbage collector's stop-the-world for all others. A
// batch pays the pwrite once for all its records.
type AsyncWriteMode int

const (
	// AsyncWriteHybrid (the default): a batch (PutBatch) is written with
	// one pwrite, and so is a single put within a second of a batch; other
	// single puts are copied into the mapping. Under load producers batch
	// and every record takes the pwrite path, while a trickle of single
	// puts stays cheap.
	AsyncWriteHybrid AsyncWriteMode = iota
	// AsyncWriteMapped copies every put, batches too, into the mapping.
	AsyncWriteMapped
	// AsyncWritePwrite writes every put with one pwrite.
	AsyncWritePwrite
)

// String returns the mode's configuration name.
func (m AsyncWriteMode) String() string {
	switch m {
	case AsyncWriteHybrid:
		return "hybrid"
	case AsyncWriteMapped:
		return "mapped"
	case AsyncWritePwrite:
		return "pwrite"
	}
	return fmt.Sprintf("AsyncWriteMode(%d)", int(m))
}

// FlushMode selects how commitlog writes become durable.
type FlushMode int

const (
	// FlushAsync acknowledges a put once it is in the page cache (see
	// Options.MappedWrites); a flusher goroutine fdatasyncs every
	// FlushInterval.
	FlushAsync FlushMode = iota
	// FlushSync acknowledges a put (whose WAIT property is not "false") only
	// after an fdatasync covering it (group commit), or reports
	// PutFlushDiskTimeout after SyncFlushTimeout.
	FlushSync
)

// String returns "ASYNC_FLUSH" or "SYNC_FLUSH".
func (m FlushMode) String() string {
	if m == FlushSync {
		return "SYNC_FLUSH"
	}
	return "ASYNC_FLUSH"
}

// Defaults (RocketMQ 4.9 DefaultMessageStore values where one exists).
const (
	DefaultSegmentSize         = 1 << 30
	DefaultCQEntriesPerFile    = 300_000
	DefaultIndexSlots          = 5_000_000
	DefaultIndexEntries        = 20_000_000
	DefaultMaxMessageSize      = 4 << 20
	DefaultFlushInterval       = 500 * time.Millisecond
	DefaultLogicFlushInterval  = time.Second
	DefaultIndexFlushInterval  = 10 * time.Second
	DefaultSyncFlushTimeout    = 5 * time.Second
	DefaultFileReservedTime    = 72 * time.Hour
	DefaultDeleteWhen          = "04"
	DefaultCleanInterval       = 10 * time.Second
	DefaultDiskMaxUsedRatio    = 0.75
	DefaultDiskForceCleanRatio = 0.85
	DefaultDiskFullRatio       = 0.90
	DefaultRecoverSegments     = 3
	DefaultPreallocate         = 64 << 20
	DefaultMaxOpenFiles        = 1000
)

// Options configures a Store. Start from DefaultOptions; zero numeric and
// duration fields are replaced by their defaults at Open.
type Options struct {
	Root string // store root directory (created if missing)

	SegmentSize      int64 // commitlog segment size in bytes (default 1 GiB)
	CQEntriesPerFile int   // consume-queue entries per file (default 300 000)
	IndexSlots       int   // hash slots per index file (default 5 000 000)
	IndexEntries     int   // entries per index file (default 20 000 000)
	MaxMessageSize   int   // largest body in bytes (default 4 MiB); the record around it may take recordHeadroom more (sizeError)

	FlushMode     FlushMode
	FlushInterval time.Duration // async commitlog flush period (default 500 ms)
	// LogicFlushInterval is the consume queue + checkpoint flush period
	// (default 1 s); under async flush each is a round of the commitlog
	// flusher that syncs the commitlog first (flushLoop).
	LogicFlushInterval time.Duration
	// IndexFlushInterval is how often index files are made durable (at a
	// logic flush, so rounded up to LogicFlushInterval; default 10 s).
	// Each sync writes every slot page that changed, and under load that
	// is most of the slot table (20 MB by default); what a crash loses in
	// between is re-indexed from the commitlog at recovery.
	IndexFlushInterval time.Duration
	SyncFlushTimeout   time.Duration // group-commit wait bound (default 5 s)

	FileReservedTime    time.Duration // commitlog segments older than this are deleted (default 72 h)
	DeleteWhen          string        // hours ("04" or "03;04") when expired files are deleted (default "04")
	CleanInterval       time.Duration // how often retention runs (default 10 s)
	DiskMaxUsedRatio    float64       // above this usage expired files are deleted at any hour (default 0.75)
	DiskForceCleanRatio float64       // above this, oldest files are deleted even if not expired (default 0.85)
	DiskFullRatio       float64       // above this, puts are refused with ErrDiskFull (default 0.90)
	// DiskForceClean lets retention delete the oldest segments above
	// DiskForceCleanRatio although they are unexpired and consumer groups
	// have not consumed them all (each deletion logs the number of such
	// messages at WARN and adds it to Stats.ForceDeletedUnconsumed).
	// Off (the default), an unexpired segment goes only once every group
	// has consumed it, and writes are refused at DiskFullRatio instead.
	DiskForceClean bool
	// Consumed tells retention how far consumer groups have consumed a
	// queue: the lowest next offset any group has committed, ok=false when
	// no group has (an unconsumed queue). nil: nothing counts as consumed.
	Consumed func(topic string, queueID int32) (offset int64, ok bool)
	// Retain protects a queue's records from retention: ok=true says the
	// records at or after logical offset from (maxOffset is the queue's
	// next offset) must be kept, whatever
	// FileReservedTime, the disk usage or DiskForceClean say. Retention
	// asks it about every queue once per run and keeps every segment from
	// the lowest protected record on (retainfloor.go). It must be quick
	// and must not call into the store. nil: nothing is protected.
	Retain func(topic string, queueID int32, maxOffset int64) (from int64, ok bool)
	// Preallocate is how far ahead of the writer a commitlog segment's
	// blocks are allocated (and, with WarmSegments and FlushSync, written
	// with zeros and synced): a new segment takes this much disk, not its
	// whole size, and grows a chunk at a time before the writer gets there
	// (default 64 MiB; SegmentSize or more allocates whole segments up
	// front, as before).
	Preallocate int64

	// CheckCRCOnRecover: recovery checks the integrity of every record it
	// walks (the whole-record CRC, or BODYCRC of a legacy record), not
	// only its structure (default true). Finding the next record after
	// damage always checks it.
	CheckCRCOnRecover bool
	// VerifyAllOnCrash: after a crash (abort file present), recovery checks
	// every record of every segment (the whole-record CRC of each), not
	// only those after the checkpoint, and reports damage found in old
	// segments before the broker serves (default true).
	VerifyAllOnCrash bool
	RecoverSegments  int  // normal recovery validates this many last segments (default 3)
	WarmSegments     bool // prepare new segments in the background (FlushSync pre-writes zeros so appends overwrite allocated blocks; FlushAsync allocates them)
	// AsyncWrites (FlushAsync only) says how puts reach the page cache;
	// the default is AsyncWriteHybrid.
	AsyncWrites AsyncWriteMode

	// MemoryResidentBytes: a message within this many bytes of the commitlog
	// end counts as "in memory" for pull batch limits (default 40 % of RAM).
	MemoryResidentBytes int64

	StoreHost netip.AddrPort // written into every record (default 127.0.0.1:10911)
	Logger    *slog.Logger   // nil discards

	// Now is the clock for store timestamps and retention (default time.Now).
	Now func() time.Time
	// DiskUsage, if set, returns the used fraction (0..1) of the file system
	// holding path instead of FS.Statfs (whose sizes also let allocations
	// be checked against the full mark before they are made).
	DiskUsage func(path string) (float64, error)
	// MaxOpenFiles bounds the descriptors the store keeps of its mapped
	// files (commitlog segments, consume-queue and index files; default
	// 1000): their reads go through the mapping, and a file whose
	// descriptor was closed is reopened when it is written or synced
	// again. Files in use at the same moment can exceed it briefly. The
	// process's io_uring sync rings (vfs.SyncDescriptors, up to 16
	// descriptors) count in it.
	MaxOpenFiles int
	// FS is the file layer every data file goes through (default
	// vfs.Default; tests put a fault-injecting one here).
	FS vfs.FS
	// Listener receives store events (segment rolled, corruption, slow
	// flush, ...). It is called synchronously from store goroutines and must
	// not block or call back into the store.
	Listener func(Event)
	// TagsCode, if set, overrides the consume-queue tagsCode of a record
	// (e.g. the broker's schedule topic stores the delivery time). It returns
	// ok=false to keep the default (hash of TAGS). The writer calls it for
	// each record it appends (under its lock), the dispatcher for records
	// it reads back: it must be quick and must not call into the store.
	// Its codes may change with the owner's configuration: the damage
	// checks do not hold an entry's tagsCode against it.
	TagsCode func(topic, properties []byte, storeTimestamp int64) (code int64, ok bool)
	// PutTally, if set, counts the stored puts of each written-behind
	// round for the caller, before any of them is answered (see
	// PutTally).
	PutTally PutTally
}

// DefaultOptions returns the defaults for a store rooted at root.
func DefaultOptions(root string) Options {
	return Options{
		Root:                root,
		SegmentSize:         DefaultSegmentSize,
		CQEntriesPerFile:    DefaultCQEntriesPerFile,
		IndexSlots:          DefaultIndexSlots,
		IndexEntries:        DefaultIndexEntries,
		MaxMessageSize:      DefaultMaxMessageSize,
		FlushMode:           FlushAsync,
		FlushInterval:       DefaultFlushInterval,
		LogicFlushInterval:  DefaultLogicFlushInterval,
		IndexFlushInterval:  DefaultIndexFlushInterval,
		SyncFlushTimeout:    DefaultSyncFlushTimeout,
		FileReservedTime:    DefaultFileReservedTime,
		DeleteWhen:          DefaultDeleteWhen,
		CleanInterval:       DefaultCleanInterval,
		DiskMaxUsedRatio:    DefaultDiskMaxUsedRatio,
		DiskForceCleanRatio: DefaultDiskForceCleanRatio,
		DiskFullRatio:       DefaultDiskFullRatio,
		CheckCRCOnRecover:   true,
		VerifyAllOnCrash:    true,
		RecoverSegments:     DefaultRecoverSegments,
		WarmSegments:        true,
		MemoryResidentBytes: defaultResidentBytes(),
		Preallocate:         DefaultPreallocate,
		MaxOpenFiles:        DefaultMaxOpenFiles,
	}
}

// withDefaults fills zero fields.
func (o Options) withDefaults() Options {
	d := DefaultOptions(o.Root)
	if o.SegmentSize == 0 {
		o.SegmentSize = d.SegmentSize
	}
	if o.CQEntriesPerFile == 0 {
		o.CQEntriesPerFile = d.CQEntriesPerFile
	}
	if o.IndexSlots == 0 {
		o.IndexSlots = d.IndexSlots
	}
	if o.IndexEntries == 0 {
		o.IndexEntries = d.IndexEntries
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = d.MaxMessageSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = d.FlushInterval
	}
	if o.IndexFlushInterval == 0 {
		o.IndexFlushInterval = d.IndexFlushInterval
	}
	if o.LogicFlushInterval == 0 {
		o.LogicFlushInterval = d.LogicFlushInterval
	}
	if o.SyncFlushTimeout == 0 {
		o.SyncFlushTimeout = d.SyncFlushTimeout
	}
	if o.FileReservedTime == 0 {
		o.FileReservedTime = d.FileReservedTime
	}
	if o.DeleteWhen == "" {
		o.DeleteWhen = d.DeleteWhen
	}
	if o.CleanInterval == 0 {
		o.CleanInterval = d.CleanInterval
	}
	if o.DiskMaxUsedRatio == 0 {
		o.DiskMaxUsedRatio = d.DiskMaxUsedRatio
	}
	if o.DiskForceCleanRatio == 0 {
		o.DiskForceCleanRatio = d.DiskForceCleanRatio
	}
	if o.DiskFullRatio == 0 {
		o.DiskFullRatio = d.DiskFullRatio
	}
	if o.RecoverSegments == 0 {
		o.RecoverSegments = d.RecoverSegments
	}
	if o.MemoryResidentBytes == 0 {
		o.MemoryResidentBytes = defaultResidentBytes()
	}
	if !o.StoreHost.IsValid() {
		o.StoreHost = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 10911)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Preallocate == 0 {
		o.Preallocate = d.Preallocate
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = d.MaxOpenFiles
	}
	return o
}

// Validate reports the first invalid field (after defaults are applied to
// zero fields). Errors wrap ErrInvalidOptions.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Root == "":
		return bad("Root is empty")
	case o.SegmentSize < 4096 || o.SegmentSize > 1<<31-1:
		return bad("SegmentSize %d outside [4096, 2^31-1]", o.SegmentSize)
	case o.CQEntriesPerFile < 1 || int64(o.CQEntriesPerFile)*cqEntrySize > 1<<31-1:
		return bad("CQEntriesPerFile %d out of range", o.CQEntriesPerFile)
	case o.IndexSlots < 1 || o.IndexEntries < 2:
		return bad("IndexSlots %d / IndexEntries %d too small", o.IndexSlots, o.IndexEntries)
	case indexFileSize(o.IndexSlots, o.IndexEntries) > 1<<31-1:
		return bad("index file of %d slots and %d entries exceeds 2 GiB", o.IndexSlots, o.IndexEntries)
	case o.MaxMessageSize < 128:
		return bad("MaxMessageSize %d too small", o.MaxMessageSize)
	case int64(o.MaxMessageSize)+8 > o.SegmentSize:
		return bad("MaxMessageSize %d + 8 exceeds SegmentSize %d", o.MaxMessageSize, o.SegmentSize)
	case o.FlushMode != FlushAsync && o.FlushMode != FlushSync:
		return bad("unknown FlushMode %d", o.FlushMode)
	case o.AsyncWrites < AsyncWriteHybrid || o.AsyncWrites > AsyncWritePwrite:
		return bad("unknown AsyncWrites %d", o.AsyncWrites)
	case o.FlushInterval < 0 || o.LogicFlushInterval < 0 || o.IndexFlushInterval < 0 || o.SyncFlushTimeout < 0 || o.CleanInterval < 0 || o.FileReservedTime < 0:
		return bad("negative duration")
	case !ratioOK(o.DiskMaxUsedRatio) || !ratioOK(o.DiskForceCleanRatio) || !ratioOK(o.DiskFullRatio):
		return bad("disk ratios must be in (0, 1]")
	case o.Preallocate < 0:
		return bad("Preallocate %d < 0", o.Preallocate)
	case o.MaxOpenFiles < minOpenFiles:
		return bad("MaxOpenFiles %d < %d", o.MaxOpenFiles, minOpenFiles)
	case o.RecoverSegments < 1:
		return bad("RecoverSegments %d < 1", o.RecoverSegments)
	}
	if _, err := parseDeleteWhen(o.DeleteWhen); err != nil {
		return bad("%v", err)
	}
	return nil
}

func ratioOK(r float64) bool { return r > 0 && r <= 1 }

// parseDeleteWhen parses "04" or "03;04" into a set of hours.
func parseDeleteWhen(s string) ([24]bool, error) {
	var hours [24]bool
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		h, err := strconv.Atoi(part)
		if err != nil || h < 0 || h > 23 {
			return hours, fmt.Errorf("DeleteWhen %q: bad hour %q", s, part)
		}
		hours[h] = true
	}
	return hours, nil
}

func defaultResidentBytes() int64 {
	total := TotalMemory()
	if total == 0 {
		return 1 << 30
	}
	return int64(total) * 40 / 100
}

// recordHeadroom is what a record may take beside its body (header, topic
// and properties, which their length fields keep under 33 KiB), as
// RocketMQ's broker allows 64 KiB beside maxMessageSize.
const recordHeadroom = 64 << 10

// sizeError refuses a record whose body exceeds MaxMessageSize or which,
// size bytes in all, exceeds MaxMessageSize+recordHeadroom or a segment
// (with its 8-byte end marker); nil when it may be stored. item >= 0 names
// a batch item in the error.
func (o *Options) sizeError(item, body, size int) error {
	limit := min(int64(o.MaxMessageSize)+recordHeadroom, o.SegmentSize-8)
	if body <= o.MaxMessageSize && int64(size) <= limit {
		return nil
	}
	what := ""
	if item >= 0 {
		what = fmt.Sprintf("batch item %d: ", item)
	}
	if body > o.MaxMessageSize {
		return fmt.Errorf("%w: %sbody of %d bytes > %d", ErrMessageTooLarge, what, body, o.MaxMessageSize)
	}
	return fmt.Errorf("%w: %srecord of %d bytes > %d", ErrMessageTooLarge, what, size, limit)
}

// minOpenFiles is the least MaxOpenFiles: the files a busy store writes
// at once (the active and the next commitlog segment, the newest index
// file, a consume-queue file) stay open.
const minOpenFiles = 8
