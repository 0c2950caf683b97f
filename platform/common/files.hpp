#pragma once
// Reading a whole file, defined once. (Writing goes through store::write_file_atomic: only the run
// directory is written, and always atomically.)
#include <filesystem>
#include <optional>
#include <string>

namespace kagent {

/// The file's bytes. Throws run_error "cannot read PATH: REASON" when it cannot be opened or read
/// (a directory cannot be read); an empty file reads as "".
std::string read_file(const std::filesystem::path& path);

/// The file's bytes, or nullopt when there is no readable file at `path`.
std::optional<std::string> read_file_if_present(const std::filesystem::path& path);

} // namespace kagent
