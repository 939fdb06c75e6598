//go:build smartgo_poison

package protocol

// With the build tag smartgo_poison every test binary poisons what
// Recycle releases (SetPoisonRecycled): `go test -tags smartgo_poison`
// runs a suite so that any header string or body slice kept beyond
// Recycle shows.
func init() { poisonRecycled.Store(true) }
