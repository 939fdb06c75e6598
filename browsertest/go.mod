module github.com/smartgo/smartgo/browsertest

go 1.26.0

require (
	github.com/chromedp/cdproto v0.0.0-20260714215040-dc233986426f
	github.com/chromedp/chromedp v0.16.0
	github.com/eclipse/paho.golang v0.23.0
	github.com/smartgo/smartgo v0.0.0-00010101000000-000000000000
)

require (
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260623181947-01eb4420fa68 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/smartgo/smartgo => ../
