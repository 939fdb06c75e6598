package vfs

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdatasync through io_uring, waited for on the runtime's network poller.
//
// A plain fdatasync blocks its thread for the length of the disk's write
// (a millisecond or more): the runtime's monitor retakes the thread's P
// and, having retaken one, polls every 20 µs for the next millisecond
// (runtime.sysmon), about 7 µs of CPU per nap on a VM; the store's
// flusher syncs 10-20 files a second while writes come in, which cost a
// state store SET about half a microsecond. Here the sync is queued to
// the kernel's io_uring worker threads (IOSQE_ASYNC: the submitting call
// returns at once) and its completion signals an eventfd the calling
// goroutine waits on like on a socket: no system call blocks, so there
// is nothing to retake. The result is the fdatasync's own (its error
// included).
//
// Each ring serves one sync at a time: a caller takes an idle ring (or
// sets one up), submits, waits, and gives it back; up to uringIdle idle
// rings are kept, and at most uringMax exist (a sync that finds them all
// busy calls fdatasync directly): with its eventfd a ring holds two
// descriptors, so the rings of the process hold at most 16, which a
// store counts in its MaxOpenFiles (SyncDescriptors). Where io_uring is
// missing or refused (old kernels, seccomp profiles that block it,
// io_uring_disabled) the first setup's failure turns it off for the
// process and fdatasync is called directly. A setup that fails for want
// of a resource that may come back (EMFILE, ENFILE, ENOMEM, EAGAIN,
// ENOBUFS, EINTR: descriptors or locked memory taken for now, an
// interrupted call; transientSetupError) only pauses setups:
// fdatasync is called directly until the pause ends (uringRetryMin,
// doubling at each further failure up to uringRetryMax) and the next
// setup tries again. A sync the ring could not run (cancelled with its
// submitting thread) is retried directly too.

// io_uring ABI (include/uapi/linux/io_uring.h).
const (
	uringOffSQRing    = 0
	uringOffSQEs      = 0x10000000
	uringOpFsync      = 3
	uringFsyncData    = 1      // IORING_FSYNC_DATASYNC
	uringSQEAsync     = 1 << 4 // IOSQE_ASYNC
	uringRegEventfd   = 4      // IORING_REGISTER_EVENTFD
	uringFeatSingleMM = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	uringFeatCurPos   = 1 << 3 // IORING_FEAT_RW_CUR_POS: Linux 5.6, as IOSQE_ASYNC
	uringSQESize      = 64
	uringCQESize      = 16
	uringIdle         = 4
	// uringEntries is a ring's size though it holds one request at a
	// time: a thread's kernel worker pool (io-wq, made at the thread's
	// first submission) runs at most as many syncs at once as the ring
	// it was made for has entries (and 4 a CPU). With one entry the syncs
	// a thread submitted ran one after the other: a commitlog group
	// commit waited for a consume queue's sync.
	uringEntries = 8
	// uringMax bounds the rings set up at once (idle or serving a sync).
	uringMax = 8
	// A setup that failed for a passing want of resources pauses setups
	// for uringRetryMin, doubled at each failure in a row up to
	// uringRetryMax.
	uringRetryMin = 100 * time.Millisecond
	uringRetryMax = 10 * time.Second
)

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uring is one ring that serves one request at a time.
type uring struct {
	fd                     int
	ev                     *os.File // eventfd the kernel signals on each completion (non-blocking: on the poller)
	ring                   []byte   // SQ and CQ rings (one mapping)
	sqes                   []byte
	sqTail, cqHead, cqTail *uint32
	sqMask, cqMask         uint32
	sqArray                []byte
	cqes                   []byte
}

var uringPool struct {
	off  atomic.Bool // io_uring unavailable: fdatasync directly
	mu   sync.Mutex
	idle []*uring // protected by mu
	// rings set up and not closed: written under mu, read without it
	// (SyncDescriptors, at each descriptor the store's fdCache opens).
	rings   atomic.Int32
	pause   time.Time     // no setup before it; protected by mu
	backoff time.Duration // the last pause's length, 0 after a setup succeeded; protected by mu
}

// datasync makes f's data durable (fdatasync).
func datasync(f *os.File) error {
	fd := int(f.Fd())
	if uringPool.off.Load() {
		return unix.Fdatasync(fd)
	}
	r := getURing()
	if r == nil {
		return unix.Fdatasync(fd)
	}
	res, err := r.fsync(fd)
	if err != nil {
		// The ring itself failed: no sync ran (or its result is lost, and
		// fdatasync again is harmless). Drop the ring, sync directly.
		discardURing(r)
		return unix.Fdatasync(fd)
	}
	putURing(r)
	switch {
	case res >= 0:
		return nil
	case unix.Errno(-res) == unix.ECANCELED || unix.Errno(-res) == unix.EINTR || unix.Errno(-res) == unix.EAGAIN:
		return unix.Fdatasync(fd)
	default:
		return unix.Errno(-res)
	}
}

// SyncDescriptors is the number of descriptors the process's sync rings
// hold now (two a ring, idle or busy; at most 2*uringMax): a store counts
// them in its MaxOpenFiles.
func SyncDescriptors() int {
	return 2 * int(uringPool.rings.Load())
}

// getURing takes an idle ring or sets one up; nil when none may be set
// up now (uringMax busy, setups paused, io_uring off).
func getURing() *uring {
	uringPool.mu.Lock()
	if n := len(uringPool.idle); n > 0 {
		r := uringPool.idle[n-1]
		uringPool.idle = uringPool.idle[:n-1]
		uringPool.mu.Unlock()
		return r
	}
	if int(uringPool.rings.Load()) >= uringMax || (!uringPool.pause.IsZero() && time.Now().Before(uringPool.pause)) {
		uringPool.mu.Unlock()
		return nil
	}
	uringPool.rings.Add(1)
	uringPool.mu.Unlock()
	r, err := newURing()
	uringPool.mu.Lock()
	defer uringPool.mu.Unlock()
	if err != nil {
		uringPool.rings.Add(-1)
		if !transientSetupError(err) {
			uringPool.off.Store(true)
			return nil
		}
		uringPool.backoff = min(max(2*uringPool.backoff, uringRetryMin), uringRetryMax)
		uringPool.pause = time.Now().Add(uringPool.backoff)
		return nil
	}
	uringPool.pause, uringPool.backoff = time.Time{}, 0
	return r
}

// transientSetupError reports whether a ring's setup failed for want of
// a resource that may come back (descriptors, memory), not because
// io_uring is missing or refused.
func transientSetupError(err error) bool {
	for _, e := range []unix.Errno{unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EAGAIN, unix.EINTR, unix.ENOBUFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// discardURing closes a ring set up by getURing.
func discardURing(r *uring) {
	r.close()
	uringPool.mu.Lock()
	uringPool.rings.Add(-1)
	uringPool.mu.Unlock()
}

func putURing(r *uring) {
	uringPool.mu.Lock()
	if len(uringPool.idle) < uringIdle {
		uringPool.idle = append(uringPool.idle, r)
		r = nil
	}
	uringPool.mu.Unlock()
	if r != nil {
		discardURing(r)
	}
}

func newURing() (*uring, error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, errno
	}
	r := &uring{fd: int(fd)}
	fail := func(err error) (*uring, error) {
		r.close()
		return nil, err
	}
	if p.features&uringFeatSingleMM == 0 {
		return fail(errors.New("vfs: io_uring without single mmap"))
	}
	if p.features&uringFeatCurPos == 0 {
		// Before Linux 5.6 IOSQE_ASYNC is an unknown flag: every sync
		// would complete with EINVAL.
		return fail(errors.New("vfs: io_uring older than Linux 5.6"))
	}
	size := max(int(p.sqOff.array)+int(p.sqEntries)*4, int(p.cqOff.cqes)+int(p.cqEntries)*uringCQESize)
	ring, err := unix.Mmap(r.fd, uringOffSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(err)
	}
	r.ring = ring
	sqes, err := unix.Mmap(r.fd, uringOffSQEs, int(p.sqEntries)*uringSQESize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(err)
	}
	r.sqes = sqes
	r.sqTail = (*uint32)(unsafe.Pointer(&ring[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&ring[p.sqOff.ringMask]))
	r.sqArray = ring[p.sqOff.array : p.sqOff.array+p.sqEntries*4]
	r.cqHead = (*uint32)(unsafe.Pointer(&ring[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&ring[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&ring[p.cqOff.ringMask]))
	r.cqes = ring[p.cqOff.cqes : p.cqOff.cqes+p.cqEntries*uringCQESize]
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail(err)
	}
	r.ev = os.NewFile(uintptr(efd), "io_uring-eventfd")
	arg := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegEventfd, uintptr(unsafe.Pointer(&arg)), 1, 0, 0); errno != 0 {
		return fail(errno)
	}
	return r, nil
}

// fsync runs fdatasync of fd on the ring and returns its result (0 or
// -errno). An error is the ring's own.
func (r *uring) fsync(fd int) (int32, error) {
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	sqe := r.sqes[idx*uringSQESize : (idx+1)*uringSQESize]
	clear(sqe)
	sqe[0] = uringOpFsync
	sqe[1] = uringSQEAsync
	binary.LittleEndian.PutUint32(sqe[4:], uint32(fd))
	binary.LittleEndian.PutUint32(sqe[28:], uringFsyncData)
	binary.LittleEndian.PutUint32(r.sqArray[idx*4:], idx)
	atomic.StoreUint32(r.sqTail, tail+1)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		if n != 1 {
			return 0, errors.New("vfs: io_uring took no request")
		}
		break
	}
	var buf [8]byte
	for {
		head := atomic.LoadUint32(r.cqHead)
		if head != atomic.LoadUint32(r.cqTail) {
			cqe := r.cqes[(head&r.cqMask)*uringCQESize:]
			res := int32(binary.LittleEndian.Uint32(cqe[8:]))
			atomic.StoreUint32(r.cqHead, head+1)
			return res, nil
		}
		// Parks the goroutine on the poller until the kernel signals the
		// completion (a count left over from the last one reads at once
		// and loops).
		if _, err := r.ev.Read(buf[:]); err != nil {
			return 0, err
		}
	}
}

func (r *uring) close() {
	if r.ev != nil {
		_ = r.ev.Close()
	}
	if r.sqes != nil {
		_ = unix.Munmap(r.sqes)
	}
	if r.ring != nil {
		_ = unix.Munmap(r.ring)
	}
	_ = unix.Close(r.fd)
}
