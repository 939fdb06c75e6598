//go:build !linux

package mqtt

// sysInq is unknown without Linux's SIOCINQ (and unused: connections
// there have reader goroutines, see netio_other.go).
func sysInq(int) int { return -1 }
