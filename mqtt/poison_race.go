//go:build race

package mqtt

// poisonInline: under the race detector (every test run of the project's
// suite) the poller overwrites an inline request's bytes as soon as its
// handler returns, so a handler that keeps any of its request past the
// call (HandleInline's contract) reads poisonByte and fails its test.
const poisonInline = true
