// The wrapper generator (preload/gen/gen_wrappers.py) and what it produced for the installed CUDA:
// every export of the real libcudart is exported by the shim, bad annotations stop the build with a
// message naming the problem, and the api table records what the annotations say.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api_ids.h"
#include "cutrace/api_table.h"
#include "gen_test_config.h"

// Readable values in failure messages.
namespace cutrace::abi {
void PrintTo(ArgFormat f, std::ostream* os) { *os << "ArgFormat(" << int(f) << ")"; }
void PrintTo(ApiClass c, std::ostream* os) { *os << "ApiClass(" << int(c) << ")"; }
}  // namespace cutrace::abi

namespace {

namespace fs = std::filesystem;
using cutrace::abi::ApiClass;
using cutrace::abi::ArgFormat;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

RunResult run(const std::vector<std::string>& argv) {
  std::string command;
  for (const auto& a : argv) command += shell_quote(a) + " ";
  command += "2>&1";
  RunResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

struct Symbol {
  std::string name;
  std::string version;  // empty when the symbol has none
};

// Defined functions in the dynamic symbol table, as `nm -D --defined-only` lists them.
std::vector<Symbol> exported_functions(const std::string& library) {
  RunResult r = run({gen_test::kNm, "-D", "--defined-only", library});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<Symbol> out;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.size() < 3 || (f[1] != "T" && f[1] != "W" && f[1] != "i")) continue;
    const size_t at = f[2].find('@');
    Symbol s{f[2].substr(0, at), at == std::string::npos ? "" : f[2].substr(at)};
    out.push_back(s);
  }
  return out;
}

TEST(PreloadExports, EveryFunctionOfTheRealRuntimeIsExported) {
  std::set<std::string> shim;
  for (const auto& s : exported_functions(gen_test::kPreload)) shim.insert(s.name);
  const auto real = exported_functions(gen_test::kRealCudart);
  ASSERT_GT(real.size(), 100u) << "nm found too few functions in " << gen_test::kRealCudart;
  std::vector<std::string> missing;
  for (const auto& s : real)
    if (!shim.count(s.name)) missing.push_back(s.name);
  EXPECT_TRUE(missing.empty()) << missing.size() << " functions of " << gen_test::kRealCudart
                               << " are not exported by the shim, first: " << missing.front();
}

// A wrapper exported under a version node of the shim's own is never bound by programs that reference
// cudaMalloc@libcudart.so.13 (see preload/preload.map), so the wrappers must carry no version at all.
TEST(PreloadExports, WrappersCarryNoVersion) {
  for (const auto& s : exported_functions(gen_test::kPreload))
    EXPECT_TRUE(s.version.empty()) << s.name << " is exported as " << s.name << s.version;
}

// The statically linked C++ runtime must stay private, or the shim would interpose on the program's.
TEST(PreloadExports, NoCxxRuntimeSymbolsLeak) {
  for (const auto& s : exported_functions(gen_test::kPreload)) {
    for (const char* prefix : {"_Z", "__cxa_", "__gxx_", "_Unwind_", "__gcc_"})
      EXPECT_NE(s.name.rfind(prefix, 0), 0u) << s.name << " is exported";
  }
}

const cutrace::ApiInfo* find_api(const std::string& name) {
  for (uint32_t i = 0; i < cutrace::kApiTableSize; ++i)
    if (name == cutrace::kApiTable[i].name) return &cutrace::kApiTable[i];
  return nullptr;
}

std::vector<ArgFormat> formats(const cutrace::ApiInfo& api) {
  std::vector<ArgFormat> out;
  for (uint8_t i = 0; i < api.arg_count; ++i) out.push_back(api.args[i].format);
  return out;
}

TEST(ApiTable, IdsIndexTheTable) {
  ASSERT_EQ(cutrace::kApiTableSize, cutrace::kApiCount);
  EXPECT_STREQ(cutrace::kApiTable[cutrace::kApi_cudaMemcpy].name, "cudaMemcpy");
  EXPECT_STREQ(cutrace::kApiTable[cutrace::kApi___cudaLaunchKernel].name, "__cudaLaunchKernel");
  std::set<std::pair<std::string, std::string>> names;
  for (uint32_t i = 0; i < cutrace::kApiTableSize; ++i) {
    const auto& api = cutrace::kApiTable[i];
    // A name may be wrapped once per major version of its library (cudaMalloc of .13 and .12).
    EXPECT_TRUE(names.insert({api.name, api.library}).second) << api.name << " appears twice in " << api.library;
    EXPECT_LE(api.arg_count, cutrace::abi::kMaxApiArgs) << api.name;
    EXPECT_EQ(api.arg_count == 0, api.args == nullptr) << api.name;
    // One library, one domain: the tools group calls by domain.
    const std::string library = api.library;
    const std::map<std::string, cutrace::abi::ApiDomain> domains = {
        {"libcudart.so.13", cutrace::abi::ApiDomain::kCudaRuntime}, {"libcuda.so.1", cutrace::abi::ApiDomain::kCudaDriver},
        {"libcublas.so.13", cutrace::abi::ApiDomain::kCublas},      {"libcublasLt.so.13", cutrace::abi::ApiDomain::kCublasLt},
        {"libcudnn.so.9", cutrace::abi::ApiDomain::kCudnn},         {"libc.so.6", cutrace::abi::ApiDomain::kOsRuntime},
        {"libcudart.so.12", cutrace::abi::ApiDomain::kCudaRuntime}, {"libcublas.so.12", cutrace::abi::ApiDomain::kCublas},
        {"libcublasLt.so.12", cutrace::abi::ApiDomain::kCublasLt}, {"libcusolver.so.12", cutrace::abi::ApiDomain::kCusolver},
        {"libcufft.so.11", cutrace::abi::ApiDomain::kCufft},
        {"libcusolverMg.so.12", cutrace::abi::ApiDomain::kCusolver},
        {"libcusparse.so.12", cutrace::abi::ApiDomain::kCusparse},  {"libcufft.so.12", cutrace::abi::ApiDomain::kCufft},
        {"libmpi.so.40", cutrace::abi::ApiDomain::kMpi},
        {"libmpich.so.12", cutrace::abi::ApiDomain::kMpi}};
    ASSERT_EQ(domains.count(library), 1u) << api.name << " lives in " << library;
    EXPECT_EQ(api.domain, domains.at(library)) << api.name;
  }
}

TEST(ApiTable, NvccPlumbingIsInternalAndTheLaunchKeepsItsUsersName) {
  for (const char* name : {"__cudaRegisterFatBinary", "__cudaRegisterFunction", "__cudaPushCallConfiguration",
                           "__cudaPopCallConfiguration", "__cudaGetKernel"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(api->flags & cutrace::format::kApiFlagInternal, cutrace::format::kApiFlagInternal) << name;
  }
  for (const char* name : {"__cudaLaunchKernel", "__cudaLaunchKernel_ptsz"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(api->flags, 0) << name;
    EXPECT_STREQ(api->display_name, "cudaLaunchKernel") << name;
  }
  EXPECT_EQ(find_api("cudaMalloc")->flags, 0);
  EXPECT_EQ(find_api("cudaMalloc")->display_name, nullptr);
}

TEST(ApiTable, DriverLaunchesRecordFunctionGeometryAndStream) {
  const std::vector<ArgFormat> launch{ArgFormat::kFunction, ArgFormat::kDim3, ArgFormat::kDim3, ArgFormat::kBytes,
                                      ArgFormat::kStream};
  for (const char* name : {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchCooperativeKernel"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(formats(*api), launch) << name;
    EXPECT_STREQ(api->args[1].name, "gridDim") << name;
    EXPECT_EQ(api->api_class, ApiClass::kKernel) << name;
    EXPECT_STREQ(api->library, "libcuda.so.1");
  }
  const auto* ex = find_api("cuLaunchKernelEx");
  ASSERT_NE(ex, nullptr);
  ASSERT_EQ(ex->arg_count, 9);
  EXPECT_STREQ(ex->args[1].name, "gridDimX");
  EXPECT_EQ(ex->args[8].format, ArgFormat::kStream);
  // The calls that name a CUfunction: out-parameter first, so the recorder can tell the derived handle.
  const auto* get_function = find_api("cuKernelGetFunction");
  ASSERT_NE(get_function, nullptr);
  EXPECT_EQ(formats(*get_function), (std::vector<ArgFormat>{ArgFormat::kFunction, ArgFormat::kFunction}));
  EXPECT_EQ(get_function->args[0].flags, cutrace::format::kArgFlagOut);
  EXPECT_EQ(get_function->args[1].flags, 0);
  const auto* attribute = find_api("cuDeviceGetAttribute");
  ASSERT_NE(attribute, nullptr);
  ASSERT_EQ(attribute->arg_count, 3);
  EXPECT_EQ(attribute->args[1].format, ArgFormat::kEnum);
  EXPECT_STREQ(attribute->args[1].type_name, "CUdevice_attribute");
  // Every version of an entry point is wrapped, each under its own name.
  for (const char* name : {"cuMemAlloc", "cuMemAlloc_v2", "cuCtxCreate", "cuCtxCreate_v4", "cuGetProcAddress",
                           "cuGetProcAddress_v2", "cuMemcpyHtoD_v2_ptds"})
    EXPECT_NE(find_api(name), nullptr) << name;
}

TEST(ApiTable, MemcpyRecordsBytesAndKind) {
  for (const char* name : {"cudaMemcpy", "cudaMemcpy_ptds"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(formats(*api), (std::vector<ArgFormat>{ArgFormat::kBytes, ArgFormat::kMemcpyKind})) << name;
    EXPECT_STREQ(api->args[0].name, "count");
    EXPECT_EQ(api->api_class, ApiClass::kMemory) << name;
    EXPECT_EQ(api->result_kind, cutrace::format::ResultKind::kErrorCode) << name;
  }
  const auto* async = find_api("cudaMemcpyAsync_ptsz");
  ASSERT_NE(async, nullptr);
  EXPECT_EQ(formats(*async),
            (std::vector<ArgFormat>{ArgFormat::kBytes, ArgFormat::kMemcpyKind, ArgFormat::kStream}));
}

TEST(ApiTable, LaunchesRecordKernelGeometryAndStream) {
  const std::vector<ArgFormat> launch{ArgFormat::kKernelHandle, ArgFormat::kDim3, ArgFormat::kDim3,
                                      ArgFormat::kBytes, ArgFormat::kStream};
  for (const char* name : {"__cudaLaunchKernel", "__cudaLaunchKernel_ptsz"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(formats(*api), launch) << name;
    EXPECT_EQ(api->api_class, ApiClass::kKernel) << name;
  }
  const auto* exc = find_api("cudaLaunchKernelExC");
  ASSERT_NE(exc, nullptr);
  EXPECT_EQ(formats(*exc), (std::vector<ArgFormat>{ArgFormat::kKernelStub, ArgFormat::kDim3, ArgFormat::kDim3,
                                                   ArgFormat::kBytes, ArgFormat::kStream}));
  EXPECT_STREQ(exc->args[3].name, "sharedMem");
}

TEST(ApiTable, RegistrationAndResultKinds) {
  const auto* reg = find_api("__cudaRegisterFunction");
  ASSERT_NE(reg, nullptr);
  EXPECT_EQ(reg->result_kind, cutrace::format::ResultKind::kVoid);
  ASSERT_EQ(reg->arg_count, 2);
  EXPECT_EQ(reg->args[1].format, ArgFormat::kKernelStub);
  const auto* get_kernel = find_api("__cudaGetKernel");
  ASSERT_NE(get_kernel, nullptr);
  EXPECT_EQ(formats(*get_kernel), (std::vector<ArgFormat>{ArgFormat::kKernelStub, ArgFormat::kKernelHandle}));
  EXPECT_EQ(find_api("__cudaRegisterFatBinary")->result_kind, cutrace::format::ResultKind::kPointer);
  EXPECT_EQ(find_api("cudaGetErrorString")->result_kind, cutrace::format::ResultKind::kPointer);
  EXPECT_EQ(find_api("__cudaPushCallConfiguration")->result_kind, cutrace::format::ResultKind::kUnsigned);
  EXPECT_EQ(find_api("cudaStreamSynchronize")->api_class, ApiClass::kSync);
  const auto* unannotated = find_api("cudaDriverGetVersion");
  ASSERT_NE(unannotated, nullptr);
  EXPECT_EQ(unannotated->api_class, ApiClass::kOther);
  EXPECT_EQ(unannotated->arg_count, 0);
}

TEST(ApiTable, GemmsRecordShapesTypesAndBatches) {
  const std::vector<ArgFormat> gemm{ArgFormat::kPointer, ArgFormat::kEnum,   ArgFormat::kEnum,
                                    ArgFormat::kSigned,  ArgFormat::kSigned, ArgFormat::kSigned};
  for (const char* name : {"cublasSgemm_v2", "cublasDgemm_v2", "cublasHgemm", "cublasSgemm_v2_64"}) {
    const auto* api = find_api(name);
    ASSERT_NE(api, nullptr) << name;
    EXPECT_EQ(formats(*api), gemm) << name;
    EXPECT_STREQ(api->args[1].type_name, "cublasOperation_t") << name;
    EXPECT_STREQ(api->args[3].name, "m") << name;
    EXPECT_EQ(api->domain, cutrace::abi::ApiDomain::kCublas);
    EXPECT_EQ(api->api_class, ApiClass::kKernel);
  }
  const auto* ex = find_api("cublasGemmStridedBatchedEx");
  ASSERT_NE(ex, nullptr);
  ASSERT_EQ(ex->arg_count, 12);
  EXPECT_STREQ(ex->args[6].type_name, "cudaDataType");
  EXPECT_STREQ(ex->args[9].name, "batchCount");
  EXPECT_STREQ(ex->args[10].type_name, "cublasComputeType_t");
  EXPECT_STREQ(ex->args[11].type_name, "cublasGemmAlgo_t");
  const auto* matmul = find_api("cublasLtMatmul");
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(matmul->domain, cutrace::abi::ApiDomain::kCublasLt);
  EXPECT_EQ(matmul->args[7].format, ArgFormat::kStream);
  // The legacy API comes from cublas.h, which cannot be included beside cublas_v2.h.
  const auto* legacy = find_api("cublasSgemm");
  ASSERT_NE(legacy, nullptr);
  EXPECT_EQ(legacy->result_kind, cutrace::format::ResultKind::kVoid);
}

TEST(ApiTable, CudnnRecordsOperationsAndDescriptorShapes) {
  const auto* conv = find_api("cudnnConvolutionForward");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->domain, cutrace::abi::ApiDomain::kCudnn);
  EXPECT_STREQ(conv->library, "libcudnn.so.9");
  EXPECT_STREQ(conv->args[4].type_name, "cudnnConvolutionFwdAlgo_t");
  const auto* tensor = find_api("cudnnSetTensor4dDescriptor");
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(formats(*tensor), (std::vector<ArgFormat>{ArgFormat::kPointer, ArgFormat::kEnum, ArgFormat::kEnum,
                                                      ArgFormat::kSigned, ArgFormat::kSigned, ArgFormat::kSigned,
                                                      ArgFormat::kSigned}));
  EXPECT_STREQ(tensor->args[2].type_name, "cudnnDataType_t");
  const auto* backend = find_api("cudnnBackendCreateDescriptor");
  ASSERT_NE(backend, nullptr);
  EXPECT_STREQ(backend->args[0].type_name, "cudnnBackendDescriptorType_t");
}

// --- the generator, run on annotations written for the occasion ---

class Generator : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cutrace-gen-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The [library] part of the real annotations: the bad entries below are the only difference.
    std::ifstream in(gen_test::kAnnotations);
    ASSERT_TRUE(in) << gen_test::kAnnotations;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("[functions.", 0) == 0) break;
      library_ += line + "\n";
    }
    ASSERT_NE(library_.find("[library]"), std::string::npos);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult generate(const std::string& functions) {
    const fs::path annotations = dir_ / "annotations.toml";
    std::ofstream(annotations) << library_ << "\n" << functions;
    return run_generator({"--library", "cudart", annotations.string(), gen_test::kRealCudart});
  }
  // The generator on `libraries` (its --library and --library-include arguments), with this build's
  // compiler, nm and CUDA headers, writing into dir_/out.
  RunResult run_generator(const std::vector<std::string>& libraries) {
    std::vector<std::string> argv{gen_test::kPython, gen_test::kGenerator};
    argv.insert(argv.end(), libraries.begin(), libraries.end());
    for (const char* a : {"--cxx", gen_test::kCxx, "--cxx-flag=-std=c++20"}) argv.push_back(a);
    argv.push_back("--out-dir");
    argv.push_back((dir_ / "out").string());
    for (const char* d : gen_test::kIncludeDirs) {
      argv.push_back("--include-dir");
      argv.push_back(d);
    }
    return run(argv);
  }
  bool generated_anything() const { return fs::exists(dir_ / "out"); }

  fs::path dir_;
  std::string library_;
};

TEST_F(Generator, AcceptsValidAnnotationsAndReportsCoverage) {
  RunResult r = generate(R"(
[functions.cudaMemcpy]
class = "memory"
args = [{ param = "count", format = "bytes" }, { param = "kind", format = "memcpy_kind" }]
)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t line = r.output.find("gen_wrappers: libcudart.so.13: ");
  ASSERT_NE(line, std::string::npos) << r.output;
  unsigned exports = 0, wrapped = 0, annotated = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + line, "gen_wrappers: libcudart.so.13: %u exports, %u wrapped", &exports,
                        &wrapped),
            2)
      << r.output;
  EXPECT_GT(exports, 100u);
  EXPECT_EQ(exports, wrapped);
  const size_t tail = r.output.find(" annotated", line);
  ASSERT_NE(tail, std::string::npos) << r.output;
  const size_t comma = r.output.rfind(", ", tail);
  ASSERT_EQ(std::sscanf(r.output.c_str() + comma, ", %u annotated", &annotated), 1) << r.output;
  EXPECT_EQ(annotated, 2u) << "cudaMemcpy and cudaMemcpy_ptds";
  for (const char* f : {"api_ids.h", "api_table.cpp", "real_functions.cpp", "wrappers_cudart.cpp"})
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
}

struct BadCase {
  const char* name;
  const char* functions;
  std::vector<const char*> expected;  // substrings of the one-line message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadAnnotations : public Generator, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadAnnotations, FailWithAClearMessage) {
  RunResult r = generate(GetParam().functions);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gen_wrappers: error: "), std::string::npos) << r.output;
  for (const char* text : GetParam().expected) EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Traceback"), std::string::npos) << "a crash, not a message:\n" << r.output;
  EXPECT_FALSE(generated_anything()) << "outputs written despite the error";
}

INSTANTIATE_TEST_SUITE_P(
    Generator, BadAnnotations,
    ::testing::Values(
        BadCase{"UnknownFunction", "[functions.cudaMallocc]\nclass = \"memory\"\n",
                {"[functions.cudaMallocc]", "exports no function named 'cudaMallocc'", "did you mean 'cudaMalloc'"}},
        BadCase{"UnknownArgument",
                "[functions.cudaMemcpy]\nargs = [{ param = \"size\", format = \"bytes\" }]\n",
                {"[functions.cudaMemcpy] args[0]", "'size' is not a parameter of cudaMemcpy(dst, src, count, kind)"}},
        BadCase{"UnknownHookArgument",
                "[functions.__cudaRegisterFunction]\nhook = { name = \"register_function\", args = [\"hostFn\"] }\n",
                {"hook.args", "'hostFn' is not a parameter", "did you mean 'hostFun'"}},
        BadCase{"UnknownFormat", "[functions.cudaMemcpy]\nargs = [{ param = \"count\", format = \"byte\" }]\n",
                {"format", "'byte' is not one of"}},
        BadCase{"MisspelledKey", "[functions.cudaMemcpy]\nargs = [{ param = \"count\", fromat = \"bytes\" }]\n",
                {"unknown key 'fromat'", "did you mean 'format'"}},
        BadCase{"OutParameterThatIsNoPointer",
                "[functions.cudaMemcpy]\nargs = [{ param = \"count\", format = \"bytes\", out = true }]\n",
                {"out = true", "not a pointer"}},
        BadCase{"WrongParamNameCount", "[functions.__cudaGetKernel]\nparam_names = [\"kernel\"]\n",
                {"param_names", "1 names for the 2 parameters"}},
        BadCase{"TooManyArguments",
                "[functions.cudaMemcpy]\nargs = ["
                "{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},"
                "{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},"
                "{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},"
                "{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},{param=\"count\",format=\"bytes\"},"
                "{param=\"count\",format=\"bytes\"}]\n",
                {"13 args", "at most 12"}},
        BadCase{"VariadicArgumentOfAFixedFunction", "[functions.cudaMemcpy]\nvariadic = \"int extra\"\n",
                {"[functions.cudaMemcpy] variadic", "only the OS runtime's wrappers forward a variadic argument"}},
        BadCase{"NotToml", "[functions.cudaMemcpy\n", {"not valid TOML"}}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

#ifdef CUTRACE_TEST_CUDA12
// --- another major version: CUDA 12's runtime, from the wheels' headers, extending cudart.toml ---

class VersionedGenerator : public Generator {
 protected:
  // Runs the generator on CUDA 13's runtime and on CUDA 12's with `cuda12` as its annotations (which
  // extend the real cudart.toml, copied beside them), CUDA 12 read with `cuda12_include`.
  RunResult generate12(const std::string& cuda12, const std::string& cuda12_include = gen_test::kCuda12Include) {
    fs::copy_file(fs::path(gen_test::kAnnotationsDir) / "cudart.toml", dir_ / "cudart.toml");
    std::ofstream(dir_ / "cudart12.toml") << cuda12;
    return run_generator({"--library", "cudart", (dir_ / "cudart.toml").string(), gen_test::kRealCudart,
                          "--library", "cudart12", (dir_ / "cudart12.toml").string(), gen_test::kCuda12Cudart,
                          "--library-include", "cudart12", cuda12_include});
  }
  std::string read(const char* name) const {
    std::ifstream in(dir_ / "out" / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

constexpr const char kCuda12Library[] = R"([library]
extends = "cudart.toml"
soname = "libcudart.so.12"
wrappers = "versioned"
)";

// The one difference of the real cudart12.toml, for the prototype CUDA 13 changed.
constexpr const char kCuda12Prefetch[] = R"(
[functions.cudaMemPrefetchAsync]
args = [{ param = "dstDevice", format = "signed", name = "location" }]
)";

TEST_F(VersionedGenerator, ExtendedAnnotationsAreCheckedAgainstTheirOwnVersionsPrototypes) {
  RunResult r = generate12(kCuda12Library);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cudart12.toml: [functions.cudaMemPrefetchAsync] args[2]: 'location' is not a parameter "
                          "of cudaMemPrefetchAsync(devPtr, count, dstDevice, stream)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(generated_anything());
}

TEST_F(VersionedGenerator, VersionedWrappersAreDefinedUnderTheLibrarysVersion) {
  RunResult r = generate12(std::string(kCuda12Library) + kCuda12Prefetch);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gen_wrappers: libcudart.so.12: "), std::string::npos) << r.output;
  const std::string wrappers = read("wrappers_cudart12.cpp");
  EXPECT_NE(wrappers.find(".symver cutrace_cudart12_cudaMalloc, cudaMalloc@libcudart.so.12\n"), std::string::npos);
  EXPECT_NE(wrappers.find("cudaMemPrefetchAsync(const void* devPtr, size_t count, int dstDevice, cudaStream_t stream)"),
            std::string::npos);
  EXPECT_NE(wrappers.find("cutrace_shim_register_wrappers("), std::string::npos);
  const std::string map = read("versioned.map");
  EXPECT_EQ(map.find("libcudart.so.12 {\n  global:\n"), map.find('\n') + 1) << map;
  EXPECT_NE(map.find("    cudaMalloc;\n"), std::string::npos);
  // Real functions are looked up under their own version, and a CUDA 13 wrapper whose prototype CUDA 12
  // declares differently never falls back to CUDA 12's function.
  const std::string real = read("real_functions.cpp");
  EXPECT_NE(real.find("\"libcudart.so.13\""), std::string::npos);
  EXPECT_NE(real.find("\"libcudart.so.12\""), std::string::npos);
  const std::string ids = read("api_ids.h");
  auto id_of = [&](const std::string& name) {
    const size_t at = ids.find("  " + name + " = ");
    EXPECT_NE(at, std::string::npos) << name;
    return std::stoi(ids.substr(at + name.size() + 5));
  };
  auto may_fall_back = [&](int id) {
    const size_t table = real.find("g_may_fall_back[] = {\n");
    size_t line = table + std::string("g_may_fall_back[] = {\n").size();
    for (int k = 0; k < id; ++k) line = real.find('\n', line) + 1;
    return real.compare(line, 8, "    true") == 0;
  };
  EXPECT_TRUE(may_fall_back(id_of("kApi_cudaMalloc")));
  EXPECT_FALSE(may_fall_back(id_of("kApi_cudaMemPrefetchAsync")));
  EXPECT_FALSE(may_fall_back(id_of("kApi_cudart12_cudaMalloc")));
}

TEST_F(VersionedGenerator, AnOmittedEntryMustExistInTheExtendedFile) {
  RunResult r = generate12(std::string(kCuda12Library) + "omit = [\"cudaMallocc\"]\n" + kCuda12Prefetch);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[library] omit: cudart.toml has no [functions.cudaMallocc]"), std::string::npos) << r.output;
}

TEST_F(VersionedGenerator, AHeaderFromOutsideTheVersionsOwnDirectoriesStopsTheBuild) {
  // CUDA 12's headers without crt/. Where the compiler's own path has the toolkit's headers (this
  // machine links them into /usr/local/include), crt/host_defines.h would come from CUDA 13, which the
  // generator refuses; elsewhere the parser finds none. Either way the build stops naming it.
  const fs::path partial = dir_ / "partial12";
  fs::create_directories(partial);
  for (const auto& entry : fs::directory_iterator(gen_test::kCuda12Include)) {
    if (entry.path().filename() == "crt") continue;
    if (entry.is_directory()) fs::create_directory_symlink(entry.path(), partial / entry.path().filename());
    else fs::create_symlink(entry.path(), partial / entry.path().filename());
  }
  RunResult r = generate12(std::string(kCuda12Library) + kCuda12Prefetch, partial.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("crt/host_defines.h"), std::string::npos) << r.output;
  const bool toolkit_on_the_compilers_path = fs::exists("/usr/local/include/crt/host_defines.h");
  EXPECT_NE(r.output.find(toolkit_on_the_compilers_path ? "the headers are incomplete" : "file not found"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(generated_anything());
}
#endif

}  // namespace
