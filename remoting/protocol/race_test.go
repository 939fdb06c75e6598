//go:build race

package protocol

// raceBuild: the race detector makes sync.Pool drop some of what is put.
const raceBuild = true
