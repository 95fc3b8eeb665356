#pragma once
// Directories only this user can enter: the session directory ($TMPDIR/prism-<job>...) and
// the log and spill directories in it. Nothing in them is readable by others, and a path
// another user prepared (a symbolic link, or a directory they own) is refused, not used.

#include <string>

namespace prism::internal {

/// Creates `path` and its missing parents with mode 0700. If `path` already exists it must
/// be a directory (not a symbolic link) owned by this user that others cannot write to.
/// Returns "" or what is wrong, naming the path and what to do.
std::string MakePrivateDir(const std::string& path);

}  // namespace prism::internal
