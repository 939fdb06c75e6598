// Package statestore is a Go application client of SmartGo's state store
// over MQTT 5 (paho.golang), speaking the state store protocol: SET, GET,
// DEL, VDEL and KEYNOTIFY with __ts, __ft and correlation ids,
// notifications on Notifications(), and the lease-and-fencing helper:
//
//	c, err := statestore.Dial(ctx, statestore.Options{Addr: "127.0.0.1:1883", ClientID: "app-1"})
//	lock, err := c.Acquire(ctx, []byte("lock"), []byte("me"), 10*time.Second) // SET lock me NEX PX 10000
//	... c.Set(ctx, key, val, statestore.SetOptions{FencingToken: lock.Token})
//	err = lock.Release(ctx)                                                   // VDEL lock me
//
// Front ends that serve the protocol route commands to brokers with
// package client/statestore/router instead.
package statestore
