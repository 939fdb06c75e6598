//go:build !race

package mqtt

// poisonInline: see poison_race.go.
const poisonInline = false
