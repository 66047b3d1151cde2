/**
 * `screenshot`: the visible viewport via Page.captureScreenshot, scaled down to `maxWidth` CSS
 * pixels and bounded to 8,000,000 base64 characters.
 */
import { SCREENSHOT_MAX_BASE64_CHARS } from "../constants";
import { CommandError } from "../errors";
import type { ScreenshotCommand, ScreenshotResult } from "@understudy/protocol";
import type { CommandContext } from "./context";

const DEFAULT_MAX_WIDTH = 1280;
const DEFAULT_JPEG_QUALITY = 80;

interface LayoutMetrics {
  readonly cssVisualViewport: { readonly pageX: number; readonly pageY: number; readonly clientWidth: number; readonly clientHeight: number };
}

export async function screenshot(ctx: CommandContext, command: ScreenshotCommand): Promise<ScreenshotResult> {
  const format = command.format ?? "png";
  const maxWidth = command.maxWidth ?? DEFAULT_MAX_WIDTH;
  const { cssVisualViewport: view } = await ctx.cdp.send<LayoutMetrics>("Page.getLayoutMetrics", {});
  const width = Math.max(1, Math.floor(view.clientWidth));
  const height = Math.max(1, Math.floor(view.clientHeight));
  const scale = Math.min(1, maxWidth / width);
  const params = {
    format,
    ...(format === "jpeg" ? { quality: command.quality ?? DEFAULT_JPEG_QUALITY } : {}),
    clip: { x: view.pageX, y: view.pageY, width, height, scale },
    fromSurface: true,
  };
  const { data } = await ctx.cdp.send<{ data: string }>("Page.captureScreenshot", params);
  if (data.length > SCREENSHOT_MAX_BASE64_CHARS) {
    throw new CommandError(
      "invalid_arguments",
      "The screenshot exceeds 8,000,000 base64 characters; ask for format jpeg or a smaller maxWidth.",
    );
  }
  return {
    name: "screenshot",
    mimeType: format === "png" ? "image/png" : "image/jpeg",
    data,
    width: Math.max(1, Math.round(width * scale)),
    height: Math.max(1, Math.round(height * scale)),
  };
}
