//go:build !linux

package benchmark

import "context"

func runFleet(context.Context, DevicesConfig) (DevicesReport, error) {
	return DevicesReport{}, ErrDevicesUnsupported
}
