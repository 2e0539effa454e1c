//go:build !linux

package acp

// writev returns nil: batches are joined and written with one Write.
func writev(any) vectorWriter { return nil }
