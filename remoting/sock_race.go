//go:build linux && race

package remoting

import (
	"sync"
	"syscall"
)

// The race detector sees package syscall's read and write calls order
// whatever a goroutine did before a write (to any file) before whatever
// another one does after a later read (the bytes could carry it). The raw
// calls of sock_linux.go bypass package syscall, so race builds make that
// package record them: a write of nothing to /dev/null before each raw
// write, a read of nothing from it after each raw read. Connections
// whose peer uses package syscall (or the other way round) then stay
// ordered as before.
var devNull = sync.OnceValue(func() int {
	fd, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		panic("remoting: race build cannot open /dev/null: " + err.Error())
	}
	return fd
})

func raceReleaseIO() { _, _ = syscall.Write(devNull(), nil) }

func raceAcquireIO() {
	var b [1]byte
	_, _ = syscall.Read(devNull(), b[:])
}
