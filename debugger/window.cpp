// kiln-debug's frame loops: a GLFW + OpenGL 3 window (or an offscreen one for screenshots), and
// a display-less loop with ImGui's null renderer. Shared by the kiln-debug program and
// kiln::debug::show.
#include "debugger/window.h"

#include <cstdio>
#include <string>
#include <vector>

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <stb/stb_image_write.h>

#include "core/support/error.h"

namespace kiln::debugger {

namespace {

void setup_imgui() {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the same layout every run: screenshots and tests are reproducible
  ImGui::StyleColorsDark();
}

template <class F>
F gl_proc(const char* name) {
  auto f = reinterpret_cast<F>(glfwGetProcAddress(name));
  if (!f) throw Error(std::string("kiln-debug: OpenGL function ") + name + " is unavailable");
  return f;
}

}  // namespace

// No display: ImGui builds every view's draw lists and nothing is rasterized. Proves the views run.
int run_null(App& app, const WindowOptions& args) {
  setup_imgui();
  ImGuiIO& io = ImGui::GetIO();
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  long vertices = 0;
  for (int f = 0; f < args.frames; ++f) {
    io.DisplaySize = ImVec2(float(args.width), float(args.height));
    io.DeltaTime = 1.0f / 60;
    ImGui::NewFrame();
    app.frame();
    ImGui::Render();
    vertices = ImGui::GetDrawData()->TotalVtxCount;
  }
  ImGui::DestroyContext();
  std::printf("kiln-debug: headless, %d frames, %ld vertices in the last\n", args.frames, vertices);
  return vertices > 0 ? 0 : 1;
}

int run_window(App& app, const WindowOptions& args) {
  glfwSetErrorCallback([](int code, const char* text) { std::fprintf(stderr, "kiln-debug: GLFW %d: %s\n", code, text); });
  if (!glfwInit()) {
    std::fprintf(stderr, "kiln-debug: cannot open a window (no display?); use --headless, or run under xvfb-run\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  if (args.headless) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* window = glfwCreateWindow(args.width, args.height, "kiln-debug", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    std::fprintf(stderr, "kiln-debug: cannot create an OpenGL 3.0 window\n");
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(args.screenshot.empty() ? 1 : 0);
  setup_imgui();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  // Screenshots render into a framebuffer object: a hidden window's back buffer has undefined pixels.
  GLuint fbo = 0, color = 0;
  if (!args.screenshot.empty()) {
    auto gen_fb = gl_proc<PFNGLGENFRAMEBUFFERSPROC>("glGenFramebuffers");
    auto bind_fb = gl_proc<PFNGLBINDFRAMEBUFFERPROC>("glBindFramebuffer");
    auto gen_rb = gl_proc<PFNGLGENRENDERBUFFERSPROC>("glGenRenderbuffers");
    auto bind_rb = gl_proc<PFNGLBINDRENDERBUFFERPROC>("glBindRenderbuffer");
    auto storage = gl_proc<PFNGLRENDERBUFFERSTORAGEPROC>("glRenderbufferStorage");
    auto attach = gl_proc<PFNGLFRAMEBUFFERRENDERBUFFERPROC>("glFramebufferRenderbuffer");
    gen_fb(1, &fbo);
    bind_fb(GL_FRAMEBUFFER, fbo);
    gen_rb(1, &color);
    bind_rb(GL_RENDERBUFFER, color);
    storage(GL_RENDERBUFFER, GL_RGBA8, args.width, args.height);
    attach(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color);
  }
  int frame = 0, status = 0;
  while (!glfwWindowShouldClose(window)) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (!args.screenshot.empty()) ImGui::GetIO().DisplaySize = ImVec2(float(args.width), float(args.height));
    ImGui::NewFrame();
    app.frame();
    ImGui::Render();
    int w = args.width, h = args.height;
    if (args.screenshot.empty()) glfwGetFramebufferSize(window, &w, &h);
    glViewport(0, 0, w, h);
    glClearColor(0.08f, 0.08f, 0.09f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!args.screenshot.empty() && ++frame >= args.frames) {
      std::vector<unsigned char> pixels(size_t(w) * size_t(h) * 4);
      glPixelStorei(GL_PACK_ALIGNMENT, 1);
      glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
      // OpenGL's rows start at the bottom; PNG's at the top.
      stbi_flip_vertically_on_write(1);
      if (!stbi_write_png(args.screenshot.c_str(), w, h, 4, pixels.data(), w * 4)) {
        std::fprintf(stderr, "kiln-debug: cannot write %s\n", args.screenshot.c_str());
        status = 1;
      } else {
        std::printf("kiln-debug: wrote %s (%dx%d, %d frames)\n", args.screenshot.c_str(), w, h, frame);
      }
      break;
    }
    glfwSwapBuffers(window);
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return status;
}


}  // namespace kiln::debugger
