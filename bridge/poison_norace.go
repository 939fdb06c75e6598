//go:build !race

package bridge

// ssPoison: see poison_race.go.
const ssPoison = false
