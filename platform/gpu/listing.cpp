#include "platform/gpu/listing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/process/runner.hpp"
#include "platform/common/text.hpp"

namespace kagent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// amd-smi prints "N/A" (and nvidia-smi "[N/A]" / "[Not Supported]") for fields it cannot read.
bool not_available(const std::string& v) {
  auto u = upper(trim(v));
  return u.empty() || u == "N/A" || u == "[N/A]" || u == "[NOT SUPPORTED]";
}

/// A whole-string decimal integer, else -1 (ids are never negative).
int to_int(const std::string& v) {
  auto t = trim(v);
  if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return -1;
  return std::stoi(t);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

bool looks_like_json(const std::string& text) {
  auto p = text.find_first_not_of(" \t\r\n");
  return p != std::string::npos && (text[p] == '[' || text[p] == '{');
}

// ---- amd-smi text: "GPU: N" blocks of indented "KEY: value" lines, "SECTION:" headers ----------

struct smi_block {
  int index = -1;
  std::vector<std::pair<std::string, std::string>> fields;  ///< (SECTION/KEY or KEY, value)
  std::string get(const std::string& key) const {
    for (const auto& [k, v] : fields) {
      auto slash = k.rfind('/');
      if (k == key || (slash != std::string::npos && k.substr(slash + 1) == key)) return v;
    }
    return "";
  }
  bool has(const std::string& key) const {
    for (const auto& [k, v] : fields) {
      auto slash = k.rfind('/');
      if (k == key || (slash != std::string::npos && k.substr(slash + 1) == key)) return true;
    }
    return false;
  }
};

std::vector<smi_block> parse_smi_blocks(const std::string& text, const char* tool) {
  std::vector<smi_block> blocks;
  std::string section;
  for (const auto& raw : lines_of(text)) {
    if (trim(raw).empty()) continue;
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    auto colon = raw.find(':');
    if (!indented) {
      // A top-level line is "GPU: N"; anything else (a warning banner) is not device data.
      if (colon != std::string::npos && trim(raw.substr(0, colon)) == "GPU") {
        int idx = to_int(raw.substr(colon + 1));
        if (idx < 0) throw run_error(fmt::format("{}: unreadable GPU header line '{}'", tool, trim(raw)));
        blocks.push_back({idx, {}});
        section.clear();
      }
      continue;
    }
    if (blocks.empty() || colon == std::string::npos) continue;
    auto key = trim(raw.substr(0, colon));
    auto value = trim(raw.substr(colon + 1));
    if (value.empty()) {
      section = key;  // "ASIC:" opens a section
      continue;
    }
    blocks.back().fields.emplace_back(section.empty() ? key : section + "/" + key, value);
  }
  return blocks;
}

// ---- amd-smi JSON: values may be ints, strings, "N/A" or {"value": x, "unit": u} ---------------

const json* find_key(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (upper(it.key()) == upper(key)) return &*it;
  // One level down: {"gpu": 0, "asic": {...}} or an "enumeration" sub-object.
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (it->is_object())
      for (auto jt = it->begin(); jt != it->end(); ++jt)
        if (upper(jt.key()) == upper(key)) return &*jt;
  return nullptr;
}

std::string json_str(const json* v) {
  if (!v || v->is_null()) return "";
  if (v->is_object() && v->contains("value")) return json_str(&(*v)["value"]);
  if (v->is_string()) return not_available(v->get<std::string>()) ? "" : trim(v->get<std::string>());
  if (v->is_number_integer()) return std::to_string(v->get<long long>());
  if (v->is_number()) return fmt::format("{}", v->get<double>());
  return "";
}

int json_int(const json* v) { return to_int(json_str(v)); }

/// Both shapes: a bare list (older amd-smi) and {"gpu_data": [...]} (2025 releases).
std::vector<json> json_records(const std::string& text, const char* tool) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw run_error(fmt::format("{}: output is not valid JSON ({})", tool, e.what()));
  }
  if (doc.is_object() && doc.contains("gpu_data")) doc = doc["gpu_data"];
  if (doc.is_object()) doc = json::array({doc});
  if (!doc.is_array()) throw run_error(fmt::format("{}: JSON output is neither a list nor {{\"gpu_data\": [...]}}", tool));
  std::vector<json> out;
  for (auto& r : doc)
    if (r.is_object()) out.push_back(r);
  return out;
}

/// DEVICE_ID as "0x74a1": JSON may give an int.
std::string chip_text(const std::string& v) {
  if (not_available(v)) return "";
  auto t = trim(v);
  if (t.rfind("0x", 0) == 0 || t.rfind("0X", 0) == 0) {
    std::string out = "0x";
    for (char c : t.substr(2)) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  }
  if (int n = to_int(t); n >= 0) return fmt::format("{:#06x}", n);
  return t;
}

process_result run_tool(const std::string& path, const std::vector<std::string>& args, const tool_locations& where,
                        std::chrono::milliseconds timeout) {
  process_spec spec;
  spec.argv.push_back(path);
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = where.env;
  spec.timeout = timeout;
  spec.kill_grace = std::chrono::milliseconds(300);
  spec.max_output_bytes = 1 << 20;
  return run_process(spec);
}

std::string command_text(const std::string& tool, const std::vector<std::string>& args) {
  std::string s = tool;
  for (const auto& a : args) s += " " + a;
  return s;
}

[[noreturn]] void tool_failed(const std::string& cmd, const process_result& r) {
  std::string detail = trim(tail_of(r.err.empty() ? r.out : r.err, 300));
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  throw run_error(fmt::format("GPU listing: `{}` failed: {}{}", cmd, r.describe(), detail.empty() ? "" : ": " + detail));
}

bool is_executable_in(const std::string& dir, const std::string& name, std::string& found) {
  if (dir.empty()) return false;
  found = find_on_path(name, dir);
  return !found.empty();
}

}  // namespace

// ---- parsers ----------------------------------------------------------------------------------------

gpu_listing parse_nvidia_smi_query(const std::string& text) {
  gpu_listing out;
  for (const auto& raw : lines_of(text)) {
    auto line = trim(raw);
    if (line.empty()) continue;
    if (line.find("No devices were found") != std::string::npos) return {};
    // index, name, uuid, memory.total — the name is everything between the first and the last two
    // fields, so a name with a comma still parses.
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t p; (p = line.find(", ", start)) != std::string::npos; start = p + 2) parts.push_back(line.substr(start, p - start));
    parts.push_back(line.substr(start));
    if (parts.size() < 4 || to_int(parts[0]) < 0)
      throw run_error(fmt::format("nvidia-smi: unexpected output line '{}' (expected 'index, name, uuid, memory.total')", line));
    gpu_device d;
    d.id = to_int(parts[0]);
    d.uuid = not_available(parts[parts.size() - 2]) ? "" : trim(parts[parts.size() - 2]);
    auto mem = trim(parts.back());
    if (auto sp = mem.find(' '); sp != std::string::npos) mem = mem.substr(0, sp);  // "81559 MiB" without nounits
    try {
      d.memory_mib = not_available(mem) ? 0 : std::stod(mem);
    } catch (const std::exception&) {
      d.memory_mib = 0;
    }
    std::string name;
    for (size_t i = 1; i + 2 < parts.size(); ++i) name += (i > 1 ? ", " : "") + parts[i];
    d.name = trim(name);
    d.spec_key = resolve_device_spec_key(d);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<amd_smi_list_entry> parse_amd_smi_list(const std::string& text) {
  std::vector<amd_smi_list_entry> out;
  if (looks_like_json(text)) {
    for (const auto& r : json_records(text, "amd-smi list")) {
      amd_smi_list_entry e;
      e.smi_index = json_int(find_key(r, "gpu"));
      e.hip_id = json_int(find_key(r, "hip_id"));
      e.hsa_id = json_int(find_key(r, "hsa_id"));
      e.bdf = json_str(find_key(r, "bdf"));
      e.uuid = json_str(find_key(r, "uuid"));
      out.push_back(e);
    }
    return out;
  }
  for (const auto& b : parse_smi_blocks(text, "amd-smi list")) {
    amd_smi_list_entry e;
    e.smi_index = b.index;
    e.hip_id = b.has("HIP_ID") ? to_int(b.get("HIP_ID")) : -1;
    e.hsa_id = b.has("HSA_ID") ? to_int(b.get("HSA_ID")) : -1;
    e.bdf = b.get("BDF");
    e.uuid = b.get("UUID");
    out.push_back(e);
  }
  return out;
}

std::vector<amd_smi_asic_entry> parse_amd_smi_asic(const std::string& text) {
  std::vector<amd_smi_asic_entry> out;
  auto fill = [](amd_smi_asic_entry& e, const std::string& name, const std::string& dev, const std::string& cus,
                 const std::string& gfx) {
    e.market_name = not_available(name) ? "" : trim(name);
    e.device_id = chip_text(dev);
    e.compute_units = std::max(0, to_int(cus));
    e.gfx_target = not_available(gfx) ? "" : trim(gfx);
  };
  if (looks_like_json(text)) {
    for (const auto& r : json_records(text, "amd-smi static --asic")) {
      amd_smi_asic_entry e;
      e.smi_index = json_int(find_key(r, "gpu"));
      fill(e, json_str(find_key(r, "market_name")), json_str(find_key(r, "device_id")),
           json_str(find_key(r, "num_compute_units")), json_str(find_key(r, "target_graphics_version")));
      out.push_back(e);
    }
    return out;
  }
  for (const auto& b : parse_smi_blocks(text, "amd-smi static --asic")) {
    amd_smi_asic_entry e;
    e.smi_index = b.index;
    fill(e, b.get("MARKET_NAME"), b.get("DEVICE_ID"), b.get("NUM_COMPUTE_UNITS"), b.get("TARGET_GRAPHICS_VERSION"));
    out.push_back(e);
  }
  return out;
}

std::string resolve_device_spec_key(const gpu_device& d) {
  if (auto k = resolve_gpu_name(d.name, d.chip_id, d.compute_units)) return *k;
  if (!d.gfx_target.empty())
    if (auto k = resolve_gpu_name(d.gfx_target, d.chip_id, d.compute_units)) return *k;
  return "";
}

gpu_listing merge_amd_smi(const std::vector<amd_smi_list_entry>& list, const std::vector<amd_smi_asic_entry>& asic) {
  gpu_listing out;
  for (const auto& e : list) {
    if (e.hip_id < 0)
      throw run_error(fmt::format(
          "amd-smi list -e printed no HIP_ID for GPU {} (amd-smi from ROCm 6.4 or later is required)", e.smi_index));
    gpu_device d;
    d.id = e.hip_id;
    d.hsa_id = e.hsa_id;
    d.smi_index = e.smi_index;
    d.bdf = e.bdf;
    d.uuid = e.uuid;
    // The ASIC record with the same amd-smi index is the same device (§14 A.52); print order and the
    // HIP id play no part in this join.
    for (const auto& a : asic) {
      if (a.smi_index != e.smi_index) continue;
      d.name = a.market_name;
      d.chip_id = a.device_id;
      d.compute_units = a.compute_units;
      d.gfx_target = a.gfx_target;
      break;
    }
    d.spec_key = resolve_device_spec_key(d);
    out.push_back(std::move(d));
  }
  return out;
}

// ---- running the tools ------------------------------------------------------------------------------

tool_locations tool_locations::from_env(const env_map& env, const std::string& python) {
  tool_locations t;
  t.env = env;
  t.python = python.empty() ? "python3" : python;
  // ROCM_PATH is the ROCm installation's own convention for a non-default prefix.
  if (auto rp = env_get(env, "ROCM_PATH"); rp && !rp->empty()) t.rocm_dir = *rp;
  return t;
}

std::string find_nvidia_smi(const tool_locations& where) {
  return find_on_path("nvidia-smi", env_get(where.env, "PATH").value_or(""));
}

std::string find_amd_smi(const tool_locations& where) {
  const std::string path_var = env_get(where.env, "PATH").value_or("");
  std::string found = find_on_path("amd-smi", path_var);
  if (!found.empty()) return found;

  std::string interp = where.python;
  if (!interp.empty() && interp.find('/') == std::string::npos) interp = find_on_path(interp, path_var);
  if (!interp.empty()) {
    // As written first: a venv's bin/python is a symlink into the base install, and amd-smi sits
    // beside the symlink (the venv's bin), not beside its target.
    if (is_executable_in(fs::path(interp).parent_path().string(), "amd-smi", found)) return found;
    std::error_code ec;
    auto resolved = fs::canonical(interp, ec);
    if (!ec && is_executable_in(resolved.parent_path().string(), "amd-smi", found)) return found;
  }
  if (!where.rocm_dir.empty() && is_executable_in((fs::path(where.rocm_dir) / "bin").string(), "amd-smi", found))
    return found;
  return "";
}

gpu_listing list_nvidia_gpus(const tool_locations& where) {
  const auto tool = find_nvidia_smi(where);
  if (tool.empty()) return {};
  const std::vector<std::string> args{"--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader,nounits"};
  auto r = run_tool(tool, args, where, where.nvidia_smi_timeout);
  // With the driver loaded but no device, nvidia-smi says so and exits 6: that is an empty host.
  if (r.started && !r.timed_out && r.term_signal == 0 && r.out.find("No devices were found") != std::string::npos)
    return {};
  if (!r.ok()) tool_failed(command_text("nvidia-smi", args), r);
  return parse_nvidia_smi_query(r.out);
}

gpu_listing list_amd_gpus(const tool_locations& where) {
  const auto tool = find_amd_smi(where);
  if (tool.empty()) return {};
  std::vector<std::string> list_args{"list", "-e"};
  std::vector<std::string> asic_args{"static", "--asic"};
  if (where.amd_smi_json) {
    list_args.push_back("--json");
    asic_args.push_back("--json");
  }
  auto lr = run_tool(tool, list_args, where, where.amd_smi_timeout);
  if (!lr.ok()) tool_failed(command_text("amd-smi", list_args), lr);
  auto list = parse_amd_smi_list(lr.out);
  if (list.empty()) return {};
  auto ar = run_tool(tool, asic_args, where, where.amd_smi_timeout);
  if (!ar.ok()) tool_failed(command_text("amd-smi", asic_args), ar);
  return merge_amd_smi(list, parse_amd_smi_asic(ar.out));
}

}  // namespace kagent
