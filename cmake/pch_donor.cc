// The source of the precompiled-header donor targets (cmake/PrismBuildSpeed.cmake): empty;
// the targets exist to compile their header sets once.
