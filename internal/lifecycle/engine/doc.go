// Package engine is the control plane: the lifecycle engine of sessions
// (stop directives, reports, timers) over a store (lifecycle.Store: the file
// store, filestore, or a SQL store), and the front end's side of the
// protocol with session processes. It imports no Starlark: the lifecycle's
// types are package lifecycle's.
package engine
