//go:build race

package bridge

// ssPoison: under the race detector (every test run of the project's
// suite) a recycled state store response is overwritten before it goes
// back to its pool, so a server that sends or keeps a response after
// recycling it (mqtt.Server.SendToRecycled) delivers garbage and fails
// the tests that read responses.
const ssPoison = true
