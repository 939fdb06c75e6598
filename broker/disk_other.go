//go:build !unix

package broker

// diskSpace is not measured on this system.
func diskSpace(path string) (total, free int64, ok bool) { return 0, 0, false }
