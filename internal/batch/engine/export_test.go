package engine

// LoadPageSize is loadPageSize, for the tests of paged recovery.
const LoadPageSize = loadPageSize
