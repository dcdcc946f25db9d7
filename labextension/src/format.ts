/** Number formatting for the panel and the status bar. */

/** 1234567 -> "1.2 M", 850 -> "850", null -> "–". */
export function formatRate(value: number | null | undefined): string {
  if (value === null || value === undefined || !isFinite(value)) {
    return '–';
  }
  const units: [number, string][] = [
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k']
  ];
  for (const [scale, unit] of units) {
    if (Math.abs(value) >= scale) {
      return `${(value / scale).toFixed(1)} ${unit}`;
    }
  }
  return value.toFixed(0);
}

/** A score in at most ~9 characters ("-0.2219", "-5.46e-5"), or "–" when there is none. */
export function formatScore(value: number | null | undefined): string {
  if (value === null || value === undefined || !isFinite(value)) {
    return '–';
  }
  const size = Math.abs(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e6)) {
    return value.toExponential(2);
  }
  return value.toPrecision(4);
}

/** 0.4213 -> "42%"; null -> "". */
export function formatProgress(value: number | null | undefined): string {
  if (value === null || value === undefined || !isFinite(value)) {
    return '';
  }
  return `${Math.round(Math.min(Math.max(value, 0), 1) * 100)}%`;
}
