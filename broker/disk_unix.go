//go:build unix

package broker

import "golang.org/x/sys/unix"

// diskSpace returns the size of the file system holding path and the
// bytes available to an unprivileged writer.
func diskSpace(path string) (total, free int64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0, 0, false
	}
	bs := int64(st.Bsize) //nolint:unconvert // its type differs between systems
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, true
}
