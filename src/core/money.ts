// Amounts are integer minor units of a currency (the spec: fields ending _cents). How
// many of them make one major unit depends on the currency: 100 for USD and EUR, 1 for
// JPY and KRW, 1,000 for KWD and BHD (ISO 4217, as Node's ICU knows it; the same
// exponents Stripe uses for its amounts). Pages show and read decimals through these.

const digitsCache = new Map<string, number>();

/** The currency's decimal places (its ISO 4217 exponent); 2 for a code ICU does not know. */
export function minorDigits(currency: string | null | undefined): number {
  const code = (currency ?? '').toUpperCase();
  let digits = digitsCache.get(code);
  if (digits === undefined) {
    try {
      digits = new Intl.NumberFormat('en', { style: 'currency', currency: code }).resolvedOptions().maximumFractionDigits ?? 2;
    } catch {
      digits = 2;
    }
    if (digitsCache.size < 1000) digitsCache.set(code, digits);
  }
  return digits;
}

/** Minor units as a plain decimal in the currency's own places: 1250 usd "12.50", 500 jpy "500", 1250 kwd "1.250". */
export function decimalOf(minor: number, currency: string | null | undefined): string {
  const digits = minorDigits(currency);
  const abs = Math.abs(minor);
  const scale = 10 ** digits;
  const whole = Math.trunc(abs / scale);
  const sign = minor < 0 ? '-' : '';
  return digits === 0 ? `${sign}${whole}` : `${sign}${whole}.${String(abs % scale).padStart(digits, '0')}`;
}

/**
 * A decimal typed by a person as minor units of the currency ("12.5" usd -> 1250, "500"
 * jpy -> 500, "1.25" kwd -> 1250); null when it is not a plain non-negative decimal with
 * at most the currency's places (then the caller passes the text on to be refused).
 */
export function minorUnitsOf(text: string, currency: string | null | undefined): number | null {
  const digits = minorDigits(currency);
  const m = /^\s*(\d{1,12})(?:[.,](\d+))?\s*$/.exec(text);
  if (!m || (m[2] !== undefined && m[2].length > digits)) return null;
  return Number(m[1]) * 10 ** digits + Number((m[2] ?? '').padEnd(digits, '0') || '0');
}

/** A tax rate in parts per million as a percentage, exact, without trailing zeros: 200000 "20%", 88750 "8.875%". */
export function percentOfPpm(ppm: number): string {
  const whole = Math.floor(ppm / 10000);
  const frac = String(ppm % 10000).padStart(4, '0').replace(/0+$/, '');
  return `${whole}${frac ? `.${frac}` : ''}%`;
}
