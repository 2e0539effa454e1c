// Package docs holds the user documentation. The language server reads the
// reference of plugs from it, so that hover and completion show the text
// people read here, from one source.
package docs

import "embed"

// Reference holds the documents that describe what plug and configuration
// files can call.
//
//go:embed plugs.md messages.md config.md hosts.md
var Reference embed.FS
