// `kagent-actors report RUN`: renders RUN/report.html again from the run's files (summary.json,
// events.jsonl, program.db), also for a run that failed, was interrupted or was killed before it
// wrote a summary; prints the page's path. RUN is a run directory or a run id under --run-dir.
#include <filesystem>
#include <iostream>

#include "app/command.hpp"
#include "app/run_info.hpp"
#include "platform/common/errors.hpp"
#include "platform/report/html_report.hpp"

namespace kagent::app {
namespace {

struct report_options {
  std::string run;
  std::string run_dir = ".optimize";
};

int run_report(const report_options& o) {
  try {
    const auto dir = resolve_run(o.run, o.run_dir);
    const auto page = report::write_report_html(dir);
    std::cout << std::filesystem::absolute(page).lexically_normal().string() << "\n";
    return 0;
  } catch (const user_error& e) {
    std::cerr << "kagent-actors: error: report: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kagent-actors: error: report: " << e.what() << "\n";
    return 2;
  }
}

const register_command report_command{"report", [](CLI::App& root, int& exit_code) {
  auto opts = std::make_shared<report_options>();
  auto* sub = root.add_subcommand("report", "render RUN/report.html again from the run's files and print its path");
  sub->add_option("RUN", opts->run, "a run directory, or a run id (or unique prefix) under --run-dir")->required();
  auto* dir = sub->add_option("--run-dir", opts->run_dir, "where run ids are looked up")->capture_default_str();
  // `kagent-actors --run-dir X NAME RUN` means the same as `NAME RUN --run-dir X`.
  auto* root_dir = root.get_option_no_throw("--run-dir");
  sub->callback([opts, dir, root_dir, &exit_code] {
    if (dir->count() == 0 && root_dir && root_dir->count() > 0) opts->run_dir = root_dir->as<std::string>();
    exit_code = run_report(*opts);
  });
}};

}  // namespace
}  // namespace kagent::app
