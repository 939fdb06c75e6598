//go:build !race

package protocol

const raceBuild = false
