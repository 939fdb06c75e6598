package vfs

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pwrite writes all of b at off in f, as f.WriteAt does, but with raw
// pwrite(2) calls made inside f's syscall.RawConn: the calling goroutine
// does not enter the scheduler's system call state. A pwrite of a batch
// of records into the page cache (the store's write-behind buffer) easily
// outlasts a tick of the runtime's monitor (sysmon, 20 µs): through
// f.WriteAt the monitor then hands the caller's P to another thread (a
// futex wake-up and a thread switch) and keeps polling every 20 µs
// instead of backing off. The remoting layer's socket calls are raw for
// the same reason (remoting/sock_linux.go). A pwrite to a regular file
// copies into the page cache and waits for no disk, so the P is held
// for about as long as the copy takes.
func pwrite(f *os.File, b []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.WriteAt(b, off)
	}
	n := 0
	var errno syscall.Errno
	err = rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			w, _, e := unix.RawSyscall6(unix.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				errno = e
				return true
			case w == 0:
				errno = unix.EIO // no progress
				return true
			}
			n += int(w)
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return n, nil
}
